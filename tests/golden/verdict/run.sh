#!/bin/sh
# Golden tests of the row verdicts: every folder under tests/golden/verdict/
# holds receipt.json, an optional policy.toml, expected.md (the exact
# `megabench verdict --format markdown` output) and expected_exit. The JSON
# output is checked to parse and to name the same verdict for every row.
# gen.py writes the receipts; --bless rewrites expected.md from the current
# output, to be reviewed by hand.
# Usage: run.sh [--bless]
set -u
src="${MB_SOURCE_ROOT:-$(cd "$(dirname "$0")/../../.." && pwd)}"
mb="${MEGABENCH:?MEGABENCH must name the megabench binary}"
bless=0
[ "${1:-}" = "--bless" ] && bless=1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
failed=0
count=0
for dir in "$src"/tests/golden/verdict/*/; do
	name=$(basename "$dir")
	count=$((count + 1))
	set --
	[ -f "$dir/policy.toml" ] && set -- --policy policy.toml
	(cd "$dir" && "$mb" verdict --format markdown "$@" receipt.json) >"$tmp/$name.md" 2>"$tmp/$name.err"
	rc=$?
	[ "$bless" = 1 ] && cp "$tmp/$name.md" "$dir/expected.md"
	if ! cmp -s "$tmp/$name.md" "$dir/expected.md"; then
		echo "FAIL $name: markdown differs from expected.md:"
		diff -u "$dir/expected.md" "$tmp/$name.md" | head -40
		failed=$((failed + 1))
	fi
	if [ "$rc" != "$(cat "$dir/expected_exit")" ]; then
		echo "FAIL $name: verdict exit $rc, expected $(cat "$dir/expected_exit")"
		cat "$tmp/$name.err"
		failed=$((failed + 1))
	fi
	(cd "$dir" && "$mb" verdict --format json "$@" receipt.json) >"$tmp/$name.json" 2>>"$tmp/$name.err"
	if ! "$mb" validate -q "$tmp/$name.json" 2>>"$tmp/$name.err"; then
		echo "FAIL $name: verdict --format json breaks schemas/verdict.schema.json"
		cat "$tmp/$name.err"
		failed=$((failed + 1))
	fi
	if ! python3 - "$tmp/$name.json" "$tmp/$name.md" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
md = open(sys.argv[2]).read().replace("\\|", "|").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
rows = doc["rows"] if isinstance(doc, dict) else doc
for r in rows:
    if "| %s |" % r["row"] not in md or r["label"] not in md:
        sys.exit("row %s: JSON label %r not in the Markdown" % (r["row"], r["label"]))
PY
	then
		echo "FAIL $name: JSON and Markdown disagree"
		failed=$((failed + 1))
	fi
done
echo "$count scenarios, $failed failures"
[ "$failed" = 0 ]

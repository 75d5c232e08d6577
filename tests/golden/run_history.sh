#!/bin/sh
# Golden tests of `megabench history`: every folder under
# tests/golden/history/ holds receipts/ (one receipt per nightly) and
# expected.md, the exact Markdown `megabench history receipts` prints there;
# -o must write index.html and summary.md, the latter the same Markdown.
# --bless rewrites expected.md from the current output.
set -u
src="${MB_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
mb="${MEGABENCH:?MEGABENCH must name the megabench binary}"
bless=0
[ "${1:-}" = "--bless" ] && bless=1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
failed=0
count=0
for dir in "$src"/tests/golden/history/*/; do
	name=$(basename "$dir")
	count=$((count + 1))
	before=$failed
	(cd "$dir" && "$mb" history receipts) >"$tmp/$name.md" 2>"$tmp/$name.err"
	rc=$?
	[ "$bless" = 1 ] && [ "$rc" = 0 ] && cp "$tmp/$name.md" "$dir/expected.md"
	if [ "$rc" != 0 ]; then
		echo "FAIL $name: history exit $rc"
		cat "$tmp/$name.err"
		failed=$((failed + 1))
	elif ! cmp -s "$tmp/$name.md" "$dir/expected.md"; then
		echo "FAIL $name: markdown differs from expected.md:"
		diff -u "$dir/expected.md" "$tmp/$name.md" | head -40
		failed=$((failed + 1))
	fi
	(cd "$dir" && "$mb" history -o "$tmp/$name.out" receipts) >/dev/null 2>>"$tmp/$name.err"
	if ! cmp -s "$tmp/$name.out/summary.md" "$dir/expected.md" || ! grep -q '<table class="hist">' "$tmp/$name.out/index.html"; then
		echo "FAIL $name: history -o did not write summary.md and index.html as expected"
		failed=$((failed + 1))
	fi
	# the JSON: valid by both validators, the same words as the Markdown
	# and the page, and -o's history.json the same document; the page: row,
	# decision and status first, one line per row, a point per nightly with
	# medians, the deciding streak marked
	(cd "$dir" && "$mb" history --format json receipts) >"$tmp/$name.json" 2>>"$tmp/$name.err"
	if ! "$mb" validate -q "$tmp/$name.json" 2>>"$tmp/$name.err" || ! cmp -s "$tmp/$name.json" "$tmp/$name.out/history.json" \
		|| ! python3 - "$src/schemas/history.schema.json" "$tmp/$name.json" "$dir/expected.md" "$tmp/$name.out/index.html" <<'PY'
import html, json, re, sys, jsonschema
schema, doc = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
md, page = open(sys.argv[3]).read(), html.unescape(open(sys.argv[4]).read())
jsonschema.Draft7Validator(schema).validate(doc)
for g in doc["groups"]:
    for r in g["rows"]:
        assert "| %s | %s |" % (r["row"], r["decision_text"]) in md, "decision of %s not first in the Markdown" % r["row"]
        assert r["decision_text"] in page, "the page words %s's decision otherwise" % r["row"]
# decision and status are the first columns of the page, after the row
head = re.search(r'<table class="hist">.*?</tr>', page, re.S).group(0)
cols = re.findall(r"<th>([^<]*)</th>", head)
assert cols[:3] == ["row", "decision", "status (newest)"], cols
# one chart per row with one circle per nightly that ran it with a pair
rows = re.findall(r'<tr><td data-label="row".*?</tr>', page, re.S)
assert len(rows) == sum(len(g["rows"]) for g in doc["groups"]), "one line per row"
for g in doc["groups"]:
    for r, line in zip(g["rows"], rows):
        want = sum(1 for c in r["nightlies"] if c and c["fused_median_ns"] and c["alternative_median_ns"])
        assert line.count("<circle") == want, "%s: %d points, %d nightlies with medians" % (r["row"], line.count("<circle"), want)
        if r["decision"] in ("demote", "confirmed", "dropped"):
            assert 'class="streak %s"' % r["decision"] in line, "%s: the %s streak is not marked" % (r["row"], r["decision"])
PY
	then
		echo "FAIL $name: history --format json"
		cat "$tmp/$name.err"
		failed=$((failed + 1))
	fi
	[ "$failed" = "$before" ] && echo "ok   $name"
done
# a folder that holds no receipt, and a receipt that is not valid
mkdir -p "$tmp/empty"
"$mb" history "$tmp/empty" >/dev/null 2>"$tmp/empty.err"
rc=$?
if [ "$rc" != 2 ] || ! grep -q "empty: no \*.json or \*.json.gz receipt here" "$tmp/empty.err"; then
	echo "FAIL an empty folder: exit $rc"; cat "$tmp/empty.err"; failed=$((failed + 1))
fi
mkdir -p "$tmp/bad" && echo '{"kind": "megabench.receipt"}' >"$tmp/bad/x.json"
"$mb" history "$tmp/bad" >/dev/null 2>"$tmp/bad.err"
rc=$?
if [ "$rc" != 3 ] || ! grep -q "x.json" "$tmp/bad.err"; then
	echo "FAIL an invalid receipt: exit $rc"; cat "$tmp/bad.err"; failed=$((failed + 1))
fi
if [ "$count" = 0 ]; then
	echo "no golden history found under $src/tests/golden/history"
	exit 1
fi
echo "$count histories, $failed failures"
[ "$failed" = 0 ]

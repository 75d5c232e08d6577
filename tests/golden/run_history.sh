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
	[ "$failed" = "$before" ] && echo "ok   $name"
done
# a folder that holds no receipt, and a receipt that is not valid
mkdir -p "$tmp/empty"
"$mb" history "$tmp/empty" >/dev/null 2>"$tmp/empty.err"
rc=$?
if [ "$rc" != 2 ] || ! grep -q "empty: no \*.json receipt here" "$tmp/empty.err"; then
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

#!/bin/sh
# Golden tests of diff and gate: every folder under tests/golden/gate/ holds
# base.json, head.json, an optional policy.toml, expected.md (the exact
# `megabench diff --format markdown` output) and expected_exit (the gate's
# exit code). --bless rewrites expected.md from the current output.
set -u
src="${MB_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
mb="${MEGABENCH:?MEGABENCH must name the megabench binary}"
bless=0
[ "${1:-}" = "--bless" ] && bless=1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
failed=0
count=0
for dir in "$src"/tests/golden/gate/*/; do
	name=$(basename "$dir")
	count=$((count + 1))
	set --
	[ -f "$dir/policy.toml" ] && set -- --policy policy.toml
	# run inside the folder so that file names in the output are stable
	(cd "$dir" && "$mb" diff --format markdown "$@" base.json head.json) >"$tmp/$name.md" 2>"$tmp/$name.err"
	diff_rc=$?
	(cd "$dir" && "$mb" gate "$@" --junit "$tmp/$name.xml" --baseline base.json head.json) >/dev/null 2>>"$tmp/$name.err"
	gate_rc=$?
	want=$(cat "$dir/expected_exit")
	if [ "$bless" = 1 ]; then
		cp "$tmp/$name.md" "$dir/expected.md"
	fi
	if ! cmp -s "$tmp/$name.md" "$dir/expected.md"; then
		echo "FAIL $name: markdown differs from expected.md:"
		diff -u "$dir/expected.md" "$tmp/$name.md" | head -40
		failed=$((failed + 1))
	fi
	if [ "$gate_rc" != "$want" ]; then
		echo "FAIL $name: gate exit $gate_rc, expected $want"
		cat "$tmp/$name.err"
		failed=$((failed + 1))
	fi
	# diff itself refuses incomparable receipts with 3 and is 0 otherwise
	want_diff=0
	[ "$want" = 3 ] && want_diff=3
	if [ "$diff_rc" != "$want_diff" ]; then
		echo "FAIL $name: diff exit $diff_rc, expected $want_diff"
		failed=$((failed + 1))
	fi
	if ! grep -q '<testsuites' "$tmp/$name.xml" 2>/dev/null; then
		echo "FAIL $name: no JUnit XML written"
		failed=$((failed + 1))
	elif [ "$want" != 0 ] && ! grep -q '<failure' "$tmp/$name.xml"; then
		echo "FAIL $name: gate failed ($want) but the JUnit XML has no <failure>"
		failed=$((failed + 1))
	elif [ "$want" = 0 ] && grep -q '<failure' "$tmp/$name.xml"; then
		echo "FAIL $name: gate passed but the JUnit XML has a <failure>"
		failed=$((failed + 1))
	fi
	[ "$failed" = 0 ] && echo "ok   $name (gate exit $gate_rc)"
done
if [ "$count" = 0 ]; then
	echo "no golden scenarios found under $src/tests/golden/gate"
	exit 1
fi
echo "$count scenarios, $failed failures"
[ "$failed" = 0 ]

#!/bin/sh
# Golden tests of diff and gate: every folder under tests/golden/gate/ holds
# base.json, head.json, an optional policy.toml, expected.md (the exact
# `megabench diff --format markdown` output), expected_exit (the gate's
# exit code) and, where diff compares what the gate calls inconclusive,
# expected_diff_exit. --bless rewrites expected.md from the current output.
# A folder with aa/ is a noise-floor case: policy.toml must be exactly what
# `megabench noise-floor aa/*.json` writes (--bless rewrites it), every
# pair of aa/ receipts must pass the gate with it, base/head must give
# expected_exit_default without it, and noise-floor must refuse an aa/
# receipt together with one of another revision. An optional args file
# holds further options for both diff and gate, one a line (--force).
# Usage: run_gate.sh [--bless] [FOLDER] (default tests/golden/gate; the
# promotion scenarios live in tests/golden/promotion).
set -u
src="${MB_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
mb="${MEGABENCH:?MEGABENCH must name the megabench binary}"
bless=0
[ "${1:-}" = "--bless" ] && bless=1 && shift
cases="${1:-$src/tests/golden/gate}"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
failed=0
count=0
for dir in "$cases"/*/; do
	name=$(basename "$dir")
	count=$((count + 1))
	if [ -d "$dir/aa" ]; then
		(cd "$dir" && "$mb" noise-floor aa/*.json) >"$tmp/$name.toml" 2>>"$tmp/$name.err"
		nf_rc=$?
		[ "$bless" = 1 ] && [ "$nf_rc" = 0 ] && cp "$tmp/$name.toml" "$dir/policy.toml"
		if [ "$nf_rc" != 0 ] || ! cmp -s "$tmp/$name.toml" "$dir/policy.toml"; then
			echo "FAIL $name: noise-floor exit $nf_rc, or its policy differs from policy.toml:"
			diff -u "$dir/policy.toml" "$tmp/$name.toml" | head -40
			cat "$tmp/$name.err"
			failed=$((failed + 1))
		fi
		for a in "$dir"/aa/*.json; do
			for b in "$dir"/aa/*.json; do
				[ "$a" = "$b" ] && continue
				"$mb" gate --policy "$dir/policy.toml" --baseline "$a" "$b" >/dev/null 2>&1
				rc=$?
				if [ "$rc" != 0 ]; then
					echo "FAIL $name: A/A pair $(basename "$a") $(basename "$b") fails the gate with the learned policy ($rc)"
					failed=$((failed + 1))
				fi
			done
		done
		(cd "$dir" && "$mb" gate --baseline base.json head.json) >/dev/null 2>&1
		rc=$?
		if [ "$rc" != "$(cat "$dir/expected_exit_default")" ]; then
			echo "FAIL $name: without the learned policy the gate exits $rc, expected $(cat "$dir/expected_exit_default")"
			failed=$((failed + 1))
		fi
		(cd "$dir" && "$mb" noise-floor aa/r1.json ../regression/head.json) >/dev/null 2>"$tmp/$name.refused"
		rc=$?
		if [ "$rc" != 3 ] || ! grep -q "not an A/A run.*provenance.commit differs" "$tmp/$name.refused"; then
			echo "FAIL $name: noise-floor took receipts of two revisions (exit $rc)"
			cat "$tmp/$name.refused"
			failed=$((failed + 1))
		fi
	fi
	set --
	[ -f "$dir/policy.toml" ] && set -- --policy policy.toml
	if [ -f "$dir/args" ]; then
		while IFS= read -r arg; do
			[ -n "$arg" ] && set -- "$@" "$arg"
		done <"$dir/args"
	fi
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
	# diff itself refuses incomparable receipts with 3 and is 0 otherwise;
	# expected_diff_exit says so where the gate's 3 is inconclusive timing
	want_diff=0
	[ "$want" = 3 ] && want_diff=3
	[ -f "$dir/expected_diff_exit" ] && want_diff=$(cat "$dir/expected_diff_exit")
	if [ "$diff_rc" != "$want_diff" ]; then
		echo "FAIL $name: diff exit $diff_rc, expected $want_diff"
		failed=$((failed + 1))
	fi
	# the gate's JSON (diff's, with the gate's exit) follows schemas/diff.schema.json
	(cd "$dir" && "$mb" gate "$@" --format json --baseline base.json head.json) >"$tmp/$name.json" 2>/dev/null
	if ! "$mb" validate -q "$tmp/$name.json" 2>>"$tmp/$name.err" \
		|| [ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['gate_exit'])" "$tmp/$name.json")" != "$want" ]; then
		echo "FAIL $name: gate --format json breaks its schema or names another exit"
		cat "$tmp/$name.err"
		failed=$((failed + 1))
	fi
	if ! grep -q '<testsuites' "$tmp/$name.xml" 2>/dev/null; then
		echo "FAIL $name: no JUnit XML written"
		failed=$((failed + 1))
	elif [ "$want" != 0 ] && ! grep -q '<failure' "$tmp/$name.xml"; then
		echo "FAIL $name: gate failed ($want) but the JUnit XML has no <failure>"
		failed=$((failed + 1))
	elif [ "$want" = 4 ] && ! grep -q '<failure type="unsupported_promotion"' "$tmp/$name.xml"; then
		echo "FAIL $name: unsupported promotion (4) without its own JUnit failure type"
		failed=$((failed + 1))
	elif [ "$want" = 0 ] && grep -q '<failure' "$tmp/$name.xml"; then
		echo "FAIL $name: gate passed but the JUnit XML has a <failure>"
		failed=$((failed + 1))
	fi
	[ "$failed" = 0 ] && echo "ok   $name (gate exit $gate_rc)"
done
if [ "$count" = 0 ]; then
	echo "no golden scenarios found under $cases"
	exit 1
fi
echo "$count scenarios, $failed failures"
[ "$failed" = 0 ]

#!/usr/bin/env bash
# End to end on the CPU backend: run, validate (ours and an independent
# validator), provenance, filters, bad input, faults, Ctrl-C; selection
# (--filter, --exclude, --list, --set, --modes, --variants, --devices),
# never losing a run (output proved before the run, fallback path, --force,
# unique names, signals during the save), size caps, policies in validate,
# exit codes of the reporter, JUnit against the common schema, escaping of
# control characters, the table's columns and the Ctrl-C line.
set -u
MBT=${MEGABENCH_TEST:?} # megabench with the test-only rows: runs the fault rows (step 5)
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
jq_py() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }
schema_check() { # independent validator: python3-jsonschema, draft 7
	"$PY" - "$SRC/schemas/receipt.schema.json" "$1" <<'PY'
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft7Validator.check_schema(schema)
errors = list(jsonschema.Draft7Validator(schema).iter_errors(json.load(open(sys.argv[2]))))
for e in errors[:5]:
    print("/" + "/".join(map(str, e.absolute_path)), e.message, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
}

# 1. the smoke suite: a complete, valid receipt carrying HEAD
expect 0 "smoke run" -- "$MB" run suites/smoke.toml --backend cpu -o "$tmp/r.json"
[ -s "$tmp/r.json" ] && ok || bad "no receipt written"
tail -n 1 "$tmp/out" | grep -Eq '^[0-9]+ passed, 0 failed$' && ok || bad "last line: $(tail -n 1 "$tmp/out")"
expect 0 "megabench validate" -- "$MB" validate "$tmp/r.json"
schema_check "$tmp/r.json" && ok || bad "python3-jsonschema rejects the receipt"
planned=$("$MB" run suites/smoke.toml --backend cpu --dry-run | tail -n 1 | cut -d' ' -f1)
[ "$(jq_py "$tmp/r.json" "len(r['cases'])")" = "$planned" ] && ok || bad "case count differs from the plan ($planned)"
[ "$(jq_py "$tmp/r.json" "r['status'] + ' ' + r['backend']")" = "complete cpu" ] && ok || bad "status/backend"
if head=$(git -C "$SRC" rev-parse HEAD 2>/dev/null); then
	[ "$(jq_py "$tmp/r.json" "r['provenance']['commit']")" = "$head" ] && ok || bad "receipt commit is not HEAD ($head)"
fi
[ "$(jq_py "$tmp/r.json" "all(c['correctness']['passed'] for c in r['cases'])")" = True ] && ok || bad "a smoke case failed"

# 2. filters narrow the run; unknown names are refused with the known ones
expect 0 "filtered run" -- "$MB" run suites/smoke.toml --backend cpu --rows rope_qk --dtypes bf16 -o "$tmp/f.json"
[ "$(jq_py "$tmp/f.json" "sorted({(c['row'], c['dtype']) for c in r['cases']})")" = "[('rope_qk', 'bf16')]" ] && ok || bad "filter"
expect 2 "unknown row filter" -- "$MB" run suites/smoke.toml --backend cpu --rows nope -o "$tmp/x.json"
grep -q "rope_qk" "$tmp/err" && ok || bad "unknown row error does not name the known rows: $(cat "$tmp/err")"
[ ! -e "$tmp/x.json" ] && ok || bad "a refused run wrote a receipt"

# 3. a malformed suite: file, line and column; nothing written
printf '[suite]\nname = "x"\n[rows.rope_qk\n' > "$tmp/bad.toml"
expect 2 "malformed suite" -- "$MB" run "$tmp/bad.toml" --backend cpu -o "$tmp/y.json"
grep -Eq "bad.toml:3:[0-9]+" "$tmp/err" && ok || bad "no file:line:column: $(cat "$tmp/err")"
[ ! -e "$tmp/y.json" ] && ok || bad "malformed suite wrote a receipt"
expect 1 "validate a malformed suite" -- "$MB" validate "$tmp/bad.toml"

# 4. an unwritable output path is refused before running
expect 2 "missing output directory" -- "$MB" run suites/smoke.toml --backend cpu -o "$tmp/no/such/dir/r.json"
grep -q "does not exist" "$tmp/err" && ok || bad "unwritable path message: $(cat "$tmp/err")"
touch "$tmp/file"
expect 2 "output under a regular file" -- "$MB" run suites/smoke.toml --backend cpu -o "$tmp/file/r.json"

# 5. broken rows: wrong element, zeros, crash, hang -> statuses, valid receipt
expect 1 "faults run" -- "$MBT" run tests/e2e/faults.toml --backend cpu -o "$tmp/faults.json"
got=$(jq_py "$tmp/faults.json" "' '.join(c['row'] + ':' + c['status'] for c in r['cases'] if c['variant'] == 'host')")
want="test_scale:ok test_wrong_element:failed test_zeros:failed test_fault:crashed test_hang:timeout"
[ "$got" = "$want" ] && ok || bad "fault statuses: $got"
[ "$(jq_py "$tmp/faults.json" "all(c['status'] == 'ok' for c in r['cases'] if c['variant'] == 'reference')")" = True ] \
	&& ok || bad "reference cases next to the faults did not all pass"
expect 0 "faults receipt validates" -- "$MB" validate "$tmp/faults.json"
schema_check "$tmp/faults.json" && ok || bad "python3-jsonschema rejects the faults receipt"
tail -n 1 "$tmp/out" >/dev/null

# 6. Ctrl-C: a valid receipt marked interrupted with what finished
"$MB" run suites/smoke.toml --backend cpu --min-time 1 -o "$tmp/int.json" >"$tmp/out" 2>"$tmp/err" &
pid=$!
# interrupt once a case has finished (a loaded machine may take a while to
# get there; a fixed sleep made this check flaky), and at most after 30 s
for _ in $(seq 300); do
	grep -q '^\[1/' "$tmp/err" 2>/dev/null && break
	sleep 0.1
done
kill -INT "$pid"
wait "$pid"; code=$?
[ "$code" = 130 ] && ok || bad "interrupted run exit $code, expected 130"
[ "$(jq_py "$tmp/int.json" "r['status']")" = interrupted ] && ok || bad "receipt not marked interrupted"
n=$(jq_py "$tmp/int.json" "len(r['cases'])")
[ "$n" -ge 1 ] && [ "$n" -lt "$planned" ] && ok || bad "interrupted receipt holds $n cases"
expect 0 "interrupted receipt validates" -- "$MB" validate "$tmp/int.json"
ls "$tmp" | grep -q '^\.' && bad "a temporary file was left behind" || ok

# 7. receipts that are truncated or break the schema; unreadable files
head -c 300 "$tmp/r.json" > "$tmp/trunc.json"
expect 1 "truncated receipt" -- "$MB" validate "$tmp/trunc.json"
grep -q "trunc.json:" "$tmp/err" && ok || bad "truncated receipt message: $(cat "$tmp/err")"
"$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); r['cases'][0]['timing']['median_ns']=-1; json.dump(r,open(sys.argv[2],'w'))" "$tmp/r.json" "$tmp/neg.json"
expect 1 "schema-breaking receipt" -- "$MB" validate "$tmp/neg.json"
grep -q "/cases/0/timing/median_ns" "$tmp/err" && ok || bad "no JSON pointer: $(cat "$tmp/err")"
expect 2 "missing file" -- "$MB" validate "$tmp/nothing.json"

# 8. outside any checkout the provenance is the binary's (test_provenance.sh has the rest)
mkdir "$tmp/plain"
(cd "$tmp/plain" && "$MB" run "$SRC/suites/smoke.toml" --backend cpu --rows rope_qk --dtypes fp32 -o "$tmp/p.json") \
	>/dev/null 2>&1 && ok || bad "run outside a checkout failed"
[ "$(jq_py "$tmp/p.json" "r['provenance']['origin']")" = binary ] && ok || bad "provenance outside a checkout"

# 9. the catalog and usage
"$MB" catalog --format json > "$tmp/catalog.json" && ok || bad "catalog --format json"
expect 0 "catalog validates" -- "$MB" validate "$tmp/catalog.json"
expect 0 "run --help" -- "$MB" run --help
expect 64 "run without a suite" -- "$MB" run
expect 64 "unknown command" -- "$MB" frobnicate

# 10. repetitions: every case keeps each pass's samples and their spread
expect 0 "run --repetitions 3" -- "$MB" run suites/smoke.toml --backend cpu --rows relu2 --dtypes fp32 \
	--repetitions 3 -o "$tmp/rep.json"
expect 0 "a receipt with repetitions validates" -- "$MB" validate "$tmp/rep.json"
schema_check "$tmp/rep.json" && ok || bad "python3-jsonschema rejects the receipt with repetitions"
[ "$(jq_py "$tmp/rep.json" "(r['settings']['repetitions'], sorted({len(c['timing']['repetitions']) for c in r['cases']}), \
	all(len(c['timing']['samples_ns']) == sum(len(p['samples_ns']) for p in c['timing']['repetitions']) for c in r['cases']), \
	all(c['timing']['between_run_noise'] >= 0 for c in r['cases']))")" = "(3, [3], True, True)" ] \
	&& ok || bad "repetitions in the receipt"
[ "$(jq_py "$tmp/rep.json" "len(r['cases'])")" = "$("$MB" run suites/smoke.toml --backend cpu --rows relu2 --dtypes fp32 --dry-run | tail -n 1 | cut -d' ' -f1)" ] \
	&& ok || bad "repetitions changed the number of cases"
expect 64 "--repetitions 0" -- "$MB" run suites/smoke.toml --backend cpu --repetitions 0
expect 64 "--repetitions 1.5" -- "$MB" run suites/smoke.toml --backend cpu --repetitions 1.5


# 11. selection: --list, --filter, --exclude, --modes, --set, and filters
# that leave nothing say why
"$MB" run suites/smoke.toml --backend cpu --list >"$tmp/list" && ok || bad "--list"
"$MB" run suites/smoke.toml --backend cpu --dry-run | head -n -1 | cmp -s - "$tmp/list" && ok \
	|| bad "--list differs from the plan of --dry-run"
[ "$(wc -l <"$tmp/list")" = "$planned" ] && ok || bad "--list prints $(wc -l <"$tmp/list") ids, the plan has $planned"
got=$("$MB" run suites/smoke.toml --backend cpu --list --filter '^rope_qk/.*/bf16/' --exclude 'T=128')
[ "$got" = "rope_qk/reference/bf16/cold/tiny/T=64,Hq=4,Hk=2,D=32" ] && ok || bad "--filter/--exclude: $got"
expect 2 "--filter that matches nothing" -- "$MB" run suites/smoke.toml --backend cpu --list --filter nothing-like-it
grep -q "^megabench: --filter nothing-like-it: matches none of the $planned case ids" "$tmp/err" && ok \
	|| bad "--filter message: $(cat "$tmp/err")"
expect 2 "--filter with a bad expression" -- "$MB" run suites/smoke.toml --backend cpu --filter '('
grep -q 'invalid regular expression' "$tmp/err" && ok || bad "bad regex message: $(cat "$tmp/err")"
# smoke.toml times cold only: --modes hot runs hot instead of "no case left"
got=$("$MB" run suites/smoke.toml --backend cpu --list --modes hot,graph | cut -d/ -f4 | sort -u | tr '\n' ' ')
[ "$got" = "graph hot " ] && ok || bad "--modes hot,graph on a cold suite plans: $got"
got=$("$MB" run suites/smoke.toml --backend cpu --list --set timing.modes=graph --set axes.T=16 --rows rope_qk | sort -u)
[ "$got" = "$(printf 'rope_qk/reference/%s/graph/tiny/T=16,Hq=4,Hk=2,D=32\n' bf16 fp16 fp32 | sort)" ] && ok \
	|| bad "--set timing.modes and axes.T: $got"
expect 2 "--set of an unknown key" -- "$MB" run suites/smoke.toml --backend cpu --list --set timing.mdoes=hot
grep -q "smoke.toml: timing.mdoes (from --set timing.mdoes=hot): unknown key" "$tmp/err" && ok \
	|| bad "--set error does not name the key: $(cat "$tmp/err")"
expect 2 "--set of an impossible axis" -- "$MB" run suites/smoke.toml --backend cpu --list --set 'rows.rope_qk.families[0].axes.D=33'
grep -q "rows.rope_qk.families\[0\].axes (from --set rows.rope_qk.families\[0\].axes.D=33): shape .*D must be even" "$tmp/err" \
	&& ok || bad "--set axis error: $(cat "$tmp/err")"
expect 2 "--variants fused on the cpu backend" -- "$MB" run suites/smoke.toml --backend cpu --variants fused -o "$tmp/v.json"
grep -q "^megabench: --variants fused: the cpu backend runs only the reference variant" "$tmp/err" && ok \
	|| bad "--variants fused message: $(cat "$tmp/err")"
[ ! -e "$tmp/v.json" ] && ok || bad "--variants fused on the cpu backend wrote a receipt"
expect 0 "--variants reference,fused" -- "$MB" run suites/smoke.toml --backend cpu --rows relu2 --dtypes fp32 \
	--variants reference,fused -q -o "$tmp/v.json"
[ "$(jq_py "$tmp/v.json" "r['settings']['variants']")" = "['reference']" ] && ok \
	|| bad "settings.variants records a variant that did not apply: $(jq_py "$tmp/v.json" "r['settings']['variants']")"
grep -q "variant fused does not apply on the cpu backend" "$tmp/err" && ok || bad "no notice of the ignored variant"
# the command as typed: getopt's reordering does not reach the receipt
[ "$(jq_py "$tmp/v.json" "' '.join(r['command'][1:5])")" = "run suites/smoke.toml --backend cpu" ] && ok \
	|| bad "command: $(jq_py "$tmp/v.json" "r['command']")"
expect 2 "--devices on the cpu backend" -- "$MB" run suites/smoke.toml --backend cpu --devices 1
grep -q "^megabench: --devices: the cpu backend has no devices" "$tmp/err" && ok || bad "--devices message: $(cat "$tmp/err")"
expect 64 "--devices with a bad list" -- "$MB" run suites/smoke.toml --backend cpu --devices 0,x

# 12. validate: policies by kind, unknown rows named; suites planned as run
# plans them; size caps
printf 'min_effect = 0.03\n[rows.relu2]\nalpha = 0.05\n' >"$tmp/policy.toml"
expect 0 "validate a policy" -- "$MB" validate "$tmp/policy.toml"
grep -q "policy.toml: valid" "$tmp/out" && ok || bad "validate does not call the policy valid"
printf 'min_effect = 0.03\n[rows.relu3]\nalpha = 0.05\n' >"$tmp/badrow.toml"
expect 1 "validate a policy with an unknown row" -- "$MB" validate "$tmp/badrow.toml"
grep -q "badrow.toml: rows.relu3: unknown row \"relu3\"" "$tmp/err" && ok || bad "unknown policy row: $(cat "$tmp/err")"
printf 'min_efect = 0.03\n' >"$tmp/badkey.toml"
expect 1 "validate a policy with an unknown key" -- "$MB" validate --kind policy "$tmp/badkey.toml"
# gate names the unknown row too, as a warning
expect 0 "gate with a policy naming an unknown row" -- "$MB" gate --policy "$tmp/badrow.toml" --baseline "$tmp/r.json" "$tmp/r.json"
grep -q "rows.relu3: unknown row" "$tmp/err" && ok || bad "gate accepts an unknown policy row silently"
{
	printf '[suite]\nname = "huge"\n[timing]\nmodes = ["cold", "hot", "graph"]\n[rows.residual_rmsnorm]\n'
	for fam in 0 1; do
		printf '[[rows.residual_rmsnorm.families]]\nname = "f%s"\naxes.T = [%s]\naxes.H = [%s]\n' "$fam" \
			"$(seq -s, $((fam * 300 + 1)) $((fam * 300 + 300)))" "$(seq -s, 8 8 1600)"
	done
} >"$tmp/huge.toml"
expect 1 "validate a suite of more than a million cases" -- "$MB" validate "$tmp/huge.toml"
grep -q "huge.toml: the suite expands into more than 1000000 cases" "$tmp/err" && ok || bad "huge suite: $(cat "$tmp/err")"
expect 2 "run a suite of more than a million cases" -- "$MB" run "$tmp/huge.toml" --backend cpu --dry-run
expect 2 "a suite read from /dev/zero" -- timeout 20 "$MB" run /dev/zero --backend cpu
grep -q "^megabench: /dev/zero: a character device, not a regular file: refused unread" "$tmp/err" && ok \
	|| bad "/dev/zero: $(cat "$tmp/err")"
expect 2 "a policy read from /dev/zero" -- timeout 20 "$MB" gate --policy /dev/zero --baseline "$tmp/r.json" "$tmp/r.json"
printf '[suite]\nname = "%s"\n[rows.relu2]\nfamilies = [{ name = "a", axes = { R = 8, C = 64 } }]\n' \
	"$("$PY" -c "print('n' * 300)")" >"$tmp/longname.toml"
expect 1 "validate a suite with a 300-character name" -- "$MB" validate "$tmp/longname.toml"
grep -q "suite.name: expected at most 128 characters, got 300" "$tmp/err" && ok || bad "long name: $(cat "$tmp/err")"

# 13. never lose a run
# an existing receipt is replaced only with --force, and that is said
cp "$tmp/f.json" "$tmp/keep.json"
expect 2 "an existing -o without --force" -- "$MB" run suites/smoke.toml --backend cpu --rows relu2 --dtypes fp32 -q -o "$tmp/keep.json"
grep -q "keep.json: a receipt is already there; --force replaces it" "$tmp/err" && ok || bad "existing -o: $(cat "$tmp/err")"
cmp -s "$tmp/f.json" "$tmp/keep.json" && ok || bad "the existing receipt was changed"
expect 0 "an existing -o with --force" -- "$MB" run suites/smoke.toml --backend cpu --rows relu2 --dtypes fp32 -q --force -o "$tmp/keep.json"
grep -q "receipt written to .*keep.json (replaced the previous file, as --force asked)" "$tmp/err" && ok || bad "--force message: $(cat "$tmp/err")"
# a 250-byte file name: the temporary beside it must not be too long
long="$tmp/$("$PY" -c "print('r' * 245)").json"
expect 0 "a 250-byte -o name" -- "$MB" run suites/smoke.toml --backend cpu --rows relu2 --dtypes fp32 -q -o "$long"
[ -s "$long" ] && ok || bad "no receipt at the 250-byte name"
expect 2 "a 256-byte -o name" -- "$MB" run suites/smoke.toml --backend cpu --rows relu2 --dtypes fp32 -q -o "${long%.json}xxxxxx.json"
grep -q "longer than the 255" "$tmp/err" && ok || bad "256-byte name: $(cat "$tmp/err")"
grep -q "^\[1/" "$tmp/err" && bad "cases ran although the output could not be written" || ok
# a full disk (a file size limit) is found before the first case
(ulimit -f 2; exec "$MB" run suites/smoke.toml --backend cpu --rows relu2 --dtypes fp32 -o "$tmp/full.json") >"$tmp/out" 2>"$tmp/err"
[ $? = 2 ] && grep -q "File too large" "$tmp/err" && ! grep -q "^\[1/" "$tmp/err" && ok \
	|| bad "a full disk is not found before the run: $(cat "$tmp/err")"
# the directory deleted during the run: the receipt goes to $TMPDIR, named
mkdir "$tmp/gone" "$tmp/fallback"
TMPDIR="$tmp/fallback" "$MB" run suites/smoke.toml --backend cpu --rows relu2 --dtypes fp32 --min-time 2 \
	--set timing.max_samples=1000000 -o "$tmp/gone/r.json" >"$tmp/out" 2>"$tmp/err" &
pid=$!
sleep 1
rm -rf "$tmp/gone"
wait "$pid"; code=$?
fb=$(ls "$tmp/fallback"/megabench-*.json 2>/dev/null | head -n 1)
[ "$code" = 2 ] && [ -n "$fb" ] && grep -q "the receipt was saved to $fb instead; nothing was written here" "$tmp/err" \
	&& ok || bad "no fallback receipt (exit $code): $(cat "$tmp/err")"
[ -n "$fb" ] && "$MB" validate -q "$fb" && ok || bad "the fallback receipt is not valid"
grep -q "passed, 0 failed" "$tmp/out" && ok || bad "the table was not printed after a failed save"
# -o -: the receipt on stdout, the table on stderr
expect 0 "-o -" -- "$MB" run suites/smoke.toml --backend cpu --rows relu2 --dtypes fp32 -q -o -
"$PY" -c "import json,sys; json.load(open(sys.argv[1]))" "$tmp/out" && ok || bad "-o - wrote no JSON to stdout"
tail -n 1 "$tmp/err" | grep -Eq '^[0-9]+ passed, 0 failed$' && ok || bad "-o - dropped the summary table"
# two runs at once into the default directory: two receipts
mkdir "$tmp/cwd"
(cd "$tmp/cwd" && for i in 1 2 3; do "$MB" run "$SRC/suites/smoke.toml" --backend cpu --rows relu2 --dtypes fp32 -q >/dev/null 2>&1 & done; wait)
[ "$(ls "$tmp/cwd/receipts" | wc -l)" = 3 ] && ok || bad "three runs at once left $(ls "$tmp/cwd/receipts" | wc -l) receipts"
ls "$tmp/cwd/receipts" | grep -Eqv '^smoke-[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-[0-9]+\.json$' && bad "default names: $(ls "$tmp/cwd/receipts")" || ok
# signals at random times: a valid receipt or, before any case, none;
# never a half-written file, never killed
mkdir "$tmp/sig"
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
	sig=TERM; [ $((i % 2)) = 0 ] && sig=INT
	"$MB" run suites/smoke.toml --backend cpu --rows relu2 --min-time 0 -q -o "$tmp/sig/r$i.json" >/dev/null 2>"$tmp/sig/e$i" &
	pid=$!
	sleep "$("$PY" -c "import random; print(random.uniform(0.02, 0.9))")"
	kill -s $sig "$pid" 2>/dev/null
	wait "$pid"; code=$?
	if [ -e "$tmp/sig/r$i.json" ]; then
		{ [ "$code" = 0 ] || [ "$code" = 130 ]; } && "$MB" validate -q "$tmp/sig/r$i.json" && ok \
			|| bad "signal $sig run $i: exit $code, receipt not valid"
	elif [ ! -s "$tmp/sig/e$i" ] && [ "$code" -gt 130 ]; then
		ok # killed while the program was still being loaded, before main: nothing ran
	else
		[ "$code" = 130 ] && grep -q "no receipt written" "$tmp/sig/e$i" && ok || bad "signal $sig run $i: exit $code, no receipt"
	fi
done
ls -A "$tmp/sig" | grep -q '^\.' && bad "a signal left a temporary file: $(ls -A "$tmp/sig")" || ok

# 14. the reporter's exit codes and help
for cmd in "diff $tmp/nothing.json $tmp/r.json" "gate --baseline $tmp/nothing.json $tmp/r.json" "verdict $tmp/nothing.json" \
	"report -o $tmp/rep $tmp/nothing.json" "noise-floor $tmp/nothing.json $tmp/r.json"; do
	# shellcheck disable=SC2086
	expect 2 "missing file: $cmd" -- "$MB" $cmd
done
expect 3 "diff of a receipt that is not one" -- "$MB" diff "$tmp/trunc.json" "$tmp/r.json"
expect 2 "gate --junit into a missing directory" -- "$MB" gate --junit "$tmp/no/such/j.xml" --baseline "$tmp/r.json" "$tmp/r.json"
grep -q "j.xml: cannot write: directory .* does not exist" "$tmp/err" && ok || bad "--junit message: $(cat "$tmp/err")"
expect 0 "version --help" -- "$MB" version --help
grep -q "^usage: megabench version" "$tmp/out" && ok || bad "version --help printed: $(head -n 1 "$tmp/out")"
expect 0 "diff --help" -- "$MB" diff --help
grep -q "min_effect  *0.02" "$tmp/out" && grep -q "identical_code_max_change  *0.1" "$tmp/out" && grep -q "alpha  *0.01" "$tmp/out" \
	&& ok || bad "diff --help does not list the thresholds"

# 15. JUnit: the common schema's attributes, one testcase per case,
# comparability a property
g="$SRC/tests/golden/gate"
for pair in regression incomparable_devices improvement; do
	"$MB" gate --junit "$tmp/$pair.xml" --baseline "$g/$pair/base.json" "$g/$pair/head.json" >/dev/null 2>&1
	xmllint --noout --schema "$SRC/tests/e2e/junit.xsd" "$tmp/$pair.xml" 2>"$tmp/xsd.err" && ok \
		|| bad "$pair: JUnit breaks the common schema: $(cat "$tmp/xsd.err")"
	"$PY" - "$tmp/$pair.xml" <<'PY' && ok || bad "$pair: JUnit counts"
import sys, xml.etree.ElementTree as ET
s = ET.parse(sys.argv[1]).getroot().find("testsuite")
cases = s.findall("testcase")
assert int(s.get("tests")) == len(cases) > 0, "tests"
assert int(s.get("failures")) == sum(1 for c in cases if c.find("failure") is not None), "failures"
assert int(s.get("skipped")) == sum(1 for c in cases if c.find("skipped") is not None), "skipped"
assert not any(c.get("name") == "comparable" for c in cases), "a pseudo test"
assert any(p.get("name") == "comparable" for p in s.find("properties")), "no comparable property"
PY
done

# 16. control characters from suites and receipts are shown escaped
esc=$(printf '\033')
expect 2 "a row name with an escape sequence" -- "$MB" run suites/smoke.toml --backend cpu --rows "$(printf 'x\033[31mred')"
grep -q "$esc" "$tmp/err" && bad "a raw escape reached the terminal" || ok
grep -q 'x\\x1b\[31mred' "$tmp/err" && ok || bad "the escape is not shown as \\x1b: $(cat "$tmp/err")"
"$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); r['provenance']['describe']='\x1b]0;owned\x07v1'; json.dump(r,open(sys.argv[2],'w'))" \
	"$tmp/f.json" "$tmp/ctl.json"
"$MB" diff "$tmp/f.json" "$tmp/ctl.json" >"$tmp/out" 2>&1
grep -q "$esc" "$tmp/out" && bad "the table printer wrote a raw escape" || ok
grep -q 'x1b\]0;owned\\x07v1' "$tmp/out" && ok || bad "the table printer does not show the escape: $(head -n 1 "$tmp/out")"

# 17. the table's columns hold with a long row name
"$MB" run suites/smoke.toml --backend cpu --rows relu2,residual_rmsnorm_bwd --dtypes fp32 -q -o "$tmp/cols.json" >"$tmp/out" 2>/dev/null
"$PY" - "$tmp/out" <<'PY' && ok || bad "table columns: $(head -n 3 "$tmp/out")"
import sys
lines = [l for l in open(sys.argv[1]) if l.split() and l.split()[0] in ("row", "relu2", "residual_rmsnorm_bwd")]
starts = {l.index(" fp32 " if not l.startswith("row") else " dtype ") for l in lines}
assert len(lines) >= 3 and len(starts) == 1, starts
PY

# 18. Ctrl-C on a terminal: the table starts on a line of its own
"$PY" - "$MB" "$SRC/suites/smoke.toml" <<'PY' && ok || bad "Ctrl-C glues the table onto the progress line"
import os, pty, signal, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], [sys.argv[1], "run", sys.argv[2], "--backend", "cpu", "--min-time", "1", "-o", "-"])
out, start, sent = b"", time.time(), False
while True:
    if not sent and time.time() - start > 2.5:
        os.kill(pid, signal.SIGINT)
        sent = True
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
text = out.decode("utf-8", "replace")
header = [l for l in text.split("\n") if "check err/tol" in l]
assert header, "no table"
line = header[0].rstrip("\r").split("\r")[-1].replace("\x1b[K", "")
assert line.startswith("row"), repr(header[0][:120])
PY

finish "cpu e2e"

#!/usr/bin/env bash
# End to end on the CPU backend: run, validate (ours and an independent
# validator), provenance, filters, bad input, faults, Ctrl-C.
set -u
MB=${MEGABENCH:?}
MBT=${MEGABENCH_TEST:?} # megabench with the test-only rows: runs the fault rows (step 5)
SRC=${MB_SOURCE_ROOT:?}
PY=/usr/bin/python3
cd "$SRC"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0
ok() { checks=$((checks + 1)); }
bad() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*" >&2; }
expect() { # expect CODE DESCRIPTION -- command...
	local want=$1 what=$2; shift 3
	"$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
	if [ "$got" = "$want" ]; then ok; else bad "$what: exit $got, expected $want"; cat "$tmp/err" >&2; fi
}
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
sleep 2.5
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

# 8. provenance outside a checkout says so instead of failing
mkdir "$tmp/plain"
MEGABENCH_SOURCE_DIR="$tmp/plain" "$MB" run suites/smoke.toml --backend cpu --rows rope_qk --dtypes fp32 -o "$tmp/p.json" >/dev/null 2>&1 \
	&& ok || bad "run outside a checkout failed"
[ "$(jq_py "$tmp/p.json" "r['provenance']['available']")" = False ] && ok || bad "provenance outside a checkout"

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

echo "cpu e2e: $((checks - fails)) passed, $fails failed"
[ "$fails" = 0 ]

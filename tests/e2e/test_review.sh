#!/usr/bin/env bash
# What reviewers and CI reach for (issue 27), end to end on the CPU backend
# and the committed receipts: gzipped receipts and folders everywhere a
# receipt is read; --filter/--exclude/--rows/--only-changed/--sort on every
# reporter, and diff's case ids pasting into run --filter; a schema for
# every JSON output, checked by megabench validate and python3-jsonschema;
# the run table (family, speedup, error over tolerance, spread) in three
# formats and interleaved repetitions; validate SUITE independent of the
# host's free memory; the top-level help, catalog ROW, LICENSE and README.
set -u
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
g=tests/golden/gate
h200=reports/h200
schema_ok() { # schema_ok FILE: megabench validate and python3-jsonschema both accept FILE by its kind
	"$MB" validate -q "$1" 2>>"$tmp/schema.err" || return 1
	"$PY" - "$SRC/schemas" "$1" <<'PY'
import gzip, json, sys, jsonschema
raw = open(sys.argv[2], "rb").read()
doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
kind = doc["kind"].split(".", 1)[1]
schema = json.load(open("%s/%s.schema.json" % (sys.argv[1], kind)))
jsonschema.Draft7Validator.check_schema(schema)
errors = list(jsonschema.Draft7Validator(schema).iter_errors(doc))
for e in errors[:3]:
    print(sys.argv[2], "/" + "/".join(map(str, e.absolute_path)), e.message, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
}
jq_py() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# ---- 1. gzipped receipts, and folders, wherever receipts are read ---------
expect 0 "run -o NAME.json.gz" -- "$MB" run suites/smoke.toml --backend cpu --rows relu2,rope_qk -q -o "$tmp/r.json.gz"
[ "$(head -c 2 "$tmp/r.json.gz" | od -An -tx1 | tr -d ' ')" = 1f8b ] && ok || bad "-o r.json.gz is not gzip"
"$PY" -c "import gzip,json,sys; assert json.load(gzip.open(sys.argv[1]))['kind'] == 'megabench.receipt'" "$tmp/r.json.gz" \
	&& ok || bad "gunzip of r.json.gz is not a receipt"
gunzip -c "$tmp/r.json.gz" >"$tmp/r.json"
expect 0 "validate a .json.gz receipt" -- "$MB" validate "$tmp/r.json.gz" "$h200/heavy-d.json.gz"
expect 0 "verdict of a .json.gz receipt" -- "$MB" verdict "$h200/heavy-d.json.gz"
grep -q "moe_ffn_swiglu" "$tmp/out" && ok || bad "verdict of heavy-d.json.gz lacks its rows"
expect 0 "diff of .json and .json.gz" -- "$MB" diff "$tmp/r.json" "$tmp/r.json.gz"
expect 0 "gate of .json.gz" -- "$MB" gate --baseline "$tmp/r.json.gz" "$tmp/r.json"
expect 0 "noise-floor of .json.gz" -- "$MB" noise-floor "$tmp/r.json.gz" "$tmp/r.json"
# a folder of two runs (a copy of one run would count once), one gzipped
"$MB" run suites/smoke.toml --backend cpu --rows relu2,rope_qk -q -o "$tmp/r2.json" >/dev/null 2>&1
mkdir "$tmp/mixed" && cp "$tmp/r.json.gz" "$tmp/mixed/a.json.gz" && cp "$tmp/r2.json" "$tmp/mixed/b.json"
expect 0 "report of a folder" -- "$MB" report -o "$tmp/rep" "$tmp/mixed"
grep -q "a.json.gz" "$tmp/rep/index.html" && grep -q "b.json" "$tmp/rep/index.html" && ok \
	|| bad "report of a folder did not read both receipts"
expect 0 "history of a folder with .json.gz" -- "$MB" history "$tmp/mixed"
grep -q "a.json.gz" "$tmp/out" && ok || bad "history passed over a.json.gz"
expect 0 "noise-floor of a folder" -- "$MB" noise-floor "$tmp/mixed"
# --save-to --gzip: a time-sorted .json.gz name the nightly tools read
expect 0 "run --save-to --gzip" -- "$MB" run suites/smoke.toml --backend cpu --rows relu2 -q --save-to "$tmp/night" --gzip
ls "$tmp/night" | grep -Eq '^[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-smoke-[0-9]+\.json\.gz$' && ok || bad "--save-to --gzip name: $(ls "$tmp/night")"
expect 64 "--gzip with -o" -- "$MB" run suites/smoke.toml --backend cpu -o "$tmp/x.json" --gzip
# broken gzip: named, never a partial document
head -c 300 "$tmp/r.json.gz" >"$tmp/cut.json.gz"
expect 1 "validate a truncated .json.gz" -- "$MB" validate "$tmp/cut.json.gz"
grep -q "cut.json.gz: truncated gzip data" "$tmp/err" && ok || bad "truncated gzip: $(cat "$tmp/err")"
expect 3 "diff of a truncated .json.gz" -- "$MB" diff "$tmp/cut.json.gz" "$tmp/r.json"

# ---- 2. selection on every reporter, case ids that paste into run -------
# diff names cases by id: one pasted into run --filter selects that case
"$MB" diff "$tmp/r.json" "$tmp/r.json" >"$tmp/diff.txt" 2>&1
id=$(awk 'NR == 3 {print $1}' "$tmp/diff.txt")
[ "$("$MB" run suites/smoke.toml --backend cpu --list --filter "^$id\$")" = "$id" ] && ok \
	|| bad "diff's case id '$id' does not select itself in run --filter"
"$MB" diff --format markdown "$tmp/r.json" "$tmp/r.json" | grep -q "| \`$id\` |" && ok || bad "the Markdown diff does not show the id"
expect 0 "diff --filter" -- "$MB" diff --format json --filter '^relu2/.*/fp32/' "$tmp/r.json" "$tmp/r.json"
[ "$(jq_py "$tmp/out" "sorted({c['id'].split('/')[0] + '/' + c['dtype'] for c in d['cases']})")" = "['relu2/fp32']" ] && ok \
	|| bad "diff --filter kept: $(jq_py "$tmp/out" "[c['id'] for c in d['cases']]")"
expect 0 "diff --rows --exclude" -- "$MB" diff --format csv --rows rope_qk --exclude bf16 "$tmp/r.json" "$tmp/r.json"
! grep -q "relu2\|/bf16/" "$tmp/out" && grep -q "rope_qk/reference/fp32" "$tmp/out" && ok || bad "diff --rows --exclude: $(head -3 "$tmp/out")"
expect 2 "a filter that keeps nothing" -- "$MB" diff --filter nothing-like-it "$tmp/r.json" "$tmp/r.json"
grep -q "^megabench: --filter nothing-like-it: the selection keeps none of the" "$tmp/err" && ok || bad "empty selection: $(cat "$tmp/err")"
expect 2 "--rows of a row no receipt has" -- "$MB" verdict --rows relu3 "$tmp/r.json"
grep -q 'no receipt has a case of row "relu3"; their rows: rope_qk, relu2' "$tmp/err" && ok || bad "--rows relu3: $(cat "$tmp/err")"
expect 64 "an unknown sort key" -- "$MB" diff --sort size "$tmp/r.json" "$tmp/r.json"
expect 64 "a row sort key on diff" -- "$MB" diff --sort saved "$tmp/r.json" "$tmp/r.json"
# --only-changed and --sort on a diff: the regression alone, counts whole
expect 1 "gate --only-changed" -- "$MB" gate --format json --only-changed --baseline $g/regression/base.json $g/regression/head.json
[ "$(jq_py "$tmp/out" "(len(d['cases']), d['cases_not_shown'], d['counts']['same'], d['cases'][0]['verdict'])")" = "(1, 7, 7, 'SLOWER')" ] \
	&& ok || bad "gate --only-changed: $(jq_py "$tmp/out" "[c['id'] for c in d['cases']]")"
expect 0 "diff --sort id" -- "$MB" diff --format csv --sort id $g/regression/base.json $g/regression/head.json
csv_col() { "$PY" -c "import csv,sys; print('\n'.join(r[sys.argv[2]] for r in csv.DictReader(open(sys.argv[1]))))" "$@"; }
csv_col "$tmp/out" id >"$tmp/ids" && [ "$(wc -l <"$tmp/ids")" = 8 ] && LC_ALL=C sort -c "$tmp/ids" && ok || bad "diff --sort id is not sorted"
expect 0 "diff --sort change" -- "$MB" diff --format csv --sort change $g/regression/base.json $g/regression/head.json
[ "$(csv_col "$tmp/out" verdict | sed -n 1p)" = SLOWER ] && ok || bad "diff --sort change: the largest change is not first"
# the gate sees only the selected cases: the regressing case left out passes
expect 0 "gate --exclude the regression" -- "$MB" gate --exclude 'rmsnorm/fused' --baseline $g/regression/base.json $g/regression/head.json
# verdict: rows whose status the evidence does not support; sorted
expect 0 "verdict --only-changed" -- "$MB" verdict --format json --only-changed "$h200/heavy-d.json.gz"
[ "$(jq_py "$tmp/out" "(len(d['rows']) > 0, all(not r['status_agrees'] for r in d['rows']))")" = "(True, True)" ] && ok \
	|| bad "verdict --only-changed kept rows that agree"
expect 0 "verdict --sort row" -- "$MB" verdict --format json --sort row "$h200/heavy-d.json.gz"
[ "$(jq_py "$tmp/out" "[r['row'] for r in d['rows']] == sorted(r['row'] for r in d['rows'])")" = True ] && ok || bad "verdict --sort row"
expect 0 "verdict --sort saved" -- "$MB" verdict --format json --sort saved "$h200/verdicts-full.json.gz"
"$PY" - "$tmp/out" <<'PY' && ok || bad "verdict --sort saved is not most saved first"
import json, sys
s = [r["saved_ns_per_step"] or r["saved_ns_per_call"] or -1 for r in json.load(open(sys.argv[1]))["rows"]]
assert s == sorted(s, reverse=True) and s[0] > 0, s
PY
expect 0 "report --rows" -- "$MB" report --rows relu2 -o "$tmp/rep1" "$tmp/r.json"
grep -q "| relu2 |" "$tmp/rep1/summary.md" && ! grep -q "rope_qk" "$tmp/rep1/summary.md" && ok || bad "report --rows relu2 shows other rows"
# history: --only-changed keeps the row to demote, not the one always kept
d=tests/golden/history/two_losing_nightlies/receipts
expect 0 "history --only-changed" -- "$MB" history --format json --only-changed "$d"
[ "$(jq_py "$tmp/out" "[r['row'] for r in d['groups'][0]['rows']]")" = "['rmsnorm']" ] && ok || bad "history --only-changed"
expect 0 "history --sort action --filter" -- "$MB" history --sort action --filter '^r' "$d"
grep -A2 -- "|---|---|" "$tmp/out" | sed -n 2p | grep -q "| rmsnorm | demote" && ok || bad "history --sort action: demote is not first"
expect 0 "history --rows" -- "$MB" history --rows rope "$d"
grep -q "| rope | confirmed" "$tmp/out" && ! grep -q "| rmsnorm |" "$tmp/out" && ok || bad "history --rows rope"

# ---- 3. a schema for every JSON output -------------------------------------
"$MB" verdict --format json "$h200/heavy-d.json.gz" >"$tmp/verdict.json"
"$MB" diff --format json $g/regression/base.json $g/regression/head.json >"$tmp/diff.json"
"$MB" diff --format json --force $g/incomparable_devices/base.json $g/incomparable_devices/head.json >"$tmp/forced.json"
"$MB" diff --format json $g/incomparable_devices/base.json $g/incomparable_devices/head.json >"$tmp/refused.json" 2>/dev/null
"$MB" gate --format json --baseline $g/repetitions_regression/base.json $g/repetitions_regression/head.json >"$tmp/gate.json"
"$MB" gate --format json --only-changed --baseline $g/wrong_answer/base.json $g/wrong_answer/head.json >"$tmp/gate2.json"
"$MB" diff --format json tests/golden/promotion/promotion_without_lanes/base.json \
	tests/golden/promotion/promotion_without_lanes/head.json >"$tmp/promo.json"
"$MB" history --format json "$tmp/mixed" >"$tmp/history.json"
"$MB" history --format json tests/golden/history/losing_around_a_gap/receipts >"$tmp/history2.json"
"$MB" catalog --format json >"$tmp/catalog.json"
for f in verdict diff forced refused gate gate2 promo history history2 catalog; do
	schema_ok "$tmp/$f.json" && ok || { bad "$f.json breaks its schema"; cat "$tmp/schema.err" >&2; }
done
for f in tests/golden/verdict/*/receipt.json; do
	"$MB" verdict --format json "$f" >"$tmp/v.json" 2>/dev/null
	schema_ok "$tmp/v.json" && ok || bad "verdict of $f breaks the verdict schema"
done
# the schemas are strict: an output with a key they do not know is refused
"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d['rows'][0]['surprise'] = 1; json.dump(d, open(sys.argv[2], 'w'))" \
	"$tmp/verdict.json" "$tmp/bad-verdict.json"
expect 1 "validate refuses a verdict with an unknown key" -- "$MB" validate "$tmp/bad-verdict.json"
grep -q "bad-verdict.json: /rows/0" "$tmp/err" && ok || bad "no pointer to the unknown key: $(cat "$tmp/err")"

# ---- 6. the run table, in three formats; repetitions interleaved ----------
rows=relu2,rope_qk,swiglu,row_gather
expect 0 "run --repetitions 3" -- "$MB" run suites/smoke.toml --backend cpu --rows $rows --dtypes fp32 --min-time 0 \
	--repetitions 3 -o "$tmp/rep.json"
head -n 1 "$tmp/out" | grep -Eq '^row +family +variant +dtype +mode +shape +status +median +noise +spread +speedup +GB/s +of ceiling +check err/tol +conv$' \
	&& ok || bad "run table header: $(head -n 1 "$tmp/out")"
grep -Eq '^relu2 +tiny +reference +fp32 +cold +R=15,C=64 +ok .* [0-9.]+% +[0-9.]+% .* of [a-z+GEM]+ +pass [0-9.e-]+ +yes$' "$tmp/out" \
	&& ok || bad "run table line: $(grep '^relu2' "$tmp/out" | head -n 1)"
[ "$(jq_py "$tmp/rep.json" "all(isinstance(c['correctness']['error_over_tolerance'], (int, float)) for c in d['cases'])")" = True ] \
	&& ok || bad "a case has no error_over_tolerance"
# the passes run the rows in shuffled orders, from the seed: the same seed
# gives the same orders, and the passes do not all run alike
order() { sed -n 's|^\[[0-9]*/[0-9]*\] [a-z]* *[0-9.]* [nuµm]*s *\([a-z0-9_]*\)/.*|\1|p' "$1" | uniq | tr '\n' ' '; }
first=$(order "$tmp/err")
[ "$(echo "$first" | wc -w)" -ge 12 ] && ok || bad "progress lines of the passes: $first"
"$PY" - "$first" <<'PY' && ok || bad "the passes run the rows in one order: $first"
import sys
rows = sys.argv[1].split()
passes = [rows[i:i + 4] for i in range(0, 12, 4)]
assert all(sorted(p) == sorted(passes[0]) for p in passes), passes   # each pass every row once
assert len({tuple(p) for p in passes}) > 1, passes                  # not all in one order
PY
"$MB" run suites/smoke.toml --backend cpu --rows $rows --dtypes fp32 --min-time 0 --repetitions 3 -o "$tmp/rep2.json" \
	>/dev/null 2>"$tmp/err2"
[ "$(order "$tmp/err2")" = "$first" ] && ok || bad "the same seed gave another order: $(order "$tmp/err2")"
"$MB" run suites/smoke.toml --backend cpu --rows $rows --dtypes fp32 --min-time 0 --repetitions 3 --seed 7 \
	-o "$tmp/rep3.json" >/dev/null 2>"$tmp/err3"
[ "$(order "$tmp/err3")" != "$first" ] && ok || bad "another seed gave the same order"
# --format markdown and csv: the same cases
expect 0 "run --format csv" -- "$MB" run suites/smoke.toml --backend cpu --rows relu2 -q --format csv -o "$tmp/csv.json"
"$PY" - "$tmp/out" "$tmp/csv.json" <<'PY' && ok || bad "run --format csv"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
r = json.load(open(sys.argv[2]))
assert [x["id"] for x in rows] == [c["id"] for c in r["cases"]]
assert all(x["family"] == "tiny" and x["passed"] == "true" and float(x["error_over_tolerance"]) <= 1 for x in rows)
PY
expect 0 "run --format markdown" -- "$MB" run suites/smoke.toml --backend cpu --rows relu2 -q --format markdown -o "$tmp/md.json"
head -n 2 "$tmp/out" | tail -n 1 | grep -q '^|---|---|' && tail -n 1 "$tmp/out" | grep -Eq '^[0-9]+ passed, 0 failed$' && ok \
	|| bad "run --format markdown: $(head -n 3 "$tmp/out")"
expect 64 "run --format json" -- "$MB" run suites/smoke.toml --backend cpu --format json

# ---- 7. validate SUITE checks the file; fitting the host is the run's --------
cat >"$tmp/big.toml" <<'TOML'
[suite]
name = "big"
[rows.relu2]
dtypes = ["fp32"]
[[rows.relu2.families]]
name = "small"
axes = { R = 16, C = 64 }
[[rows.relu2.families]]
name = "huge"
axes = { R = 4194304, C = 1048576 }
TOML
expect 0 "validate a suite larger than this machine" -- "$MB" validate "$tmp/big.toml" suites/nam56r.toml
expect 0 "run it: the cases that fit run" -- "$MB" run "$tmp/big.toml" --backend cpu -q -o "$tmp/big.json"
grep -q "^megabench: 1 case left out: its shape needs more host memory than this machine has available now (.* GiB of .* GiB): relu2/reference/fp32/cold/huge/R=4194304,C=1048576 (needs [0-9.]* GiB)" "$tmp/err" \
	&& ok || bad "no notice naming the case left out: $(cat "$tmp/err")"
[ "$(jq_py "$tmp/big.json" "([c['id'] for c in d['cases']], any('relu2/reference/fp32/cold/huge' in n for n in d['notices']))")" \
	= "(['relu2/reference/fp32/cold/small/R=16,C=64'], True)" ] && ok || bad "the receipt of a run that left a case out"
expect 0 "run --list names what it leaves out" -- "$MB" run "$tmp/big.toml" --backend cpu --list
grep -q "notice: 1 case left out" "$tmp/err" && [ "$(cat "$tmp/out")" = "relu2/reference/fp32/cold/small/R=16,C=64" ] && ok \
	|| bad "run --list with a case too large: $(cat "$tmp/out" "$tmp/err")"
expect 2 "a run with nothing that fits" -- "$MB" run "$tmp/big.toml" --backend cpu --filter huge -o "$tmp/big2.json"
grep -q "every case selected needs more host memory than this machine has available now" "$tmp/err" && ok \
	|| bad "nothing fits: $(cat "$tmp/err")"

# ---- 8. the top-level help, catalog ROW, LICENSE, and a README that is true --
expect 0 "megabench --help" -- "$MB" --help
grep -q "4 (gate) a row's catalog status claims more than" "$tmp/out" && ok || bad "--help does not list exit 4"
expect 0 "catalog ROW" -- "$MB" catalog relu2
[ "$(grep -c '^[a-z0-9_]*  \[' "$tmp/out")" = 1 ] && grep -q '^relu2  \[E\]' "$tmp/out" && tail -n 1 "$tmp/out" | grep -q '^1 row;' \
	&& ok || bad "catalog relu2 shows: $(head -n 2 "$tmp/out")"
expect 0 "catalog --format json ROW ROW" -- "$MB" catalog --format json swiglu relu2
[ "$(jq_py "$tmp/out" "[r['name'] for r in d['rows']]")" = "['swiglu', 'relu2']" ] && ok || bad "catalog --format json swiglu relu2"
expect 2 "catalog of a row that is not one" -- "$MB" catalog relu3
grep -q "^megabench: relu3: no such row in the catalog.*known rows: .*relu2" "$tmp/err" && ok || bad "catalog relu3: $(cat "$tmp/err")"
head -n 1 LICENSE | grep -q "^MIT License$" && grep -q "license: 'MIT'" meson.build && ok || bad "no MIT LICENSE file"
# two package lists, both named in the README and installed by CI
for f in .ci/packages.txt .ci/test-packages.txt; do
	[ -s "$f" ] && grep -q "$f" README.md && grep -q "$f" .ci/run && ok || bad "$f: missing, or not named in README.md and .ci/run"
done
grep -qx zlib1g-dev .ci/packages.txt && grep -qx chromium .ci/test-packages.txt && ! grep -qx chromium .ci/packages.txt && ok \
	|| bad "runtime and test packages are mixed"
grep -q -- "-Dcuda=disabled" README.md && grep -q "not_converged" README.md && ok || bad "README: -Dcuda=disabled or the first run's findings"
# the README's case counts are the plans of today's suites
smoke=$("$MB" run suites/smoke.toml --backend cpu --dry-run | tail -n 1 | cut -d' ' -f1)
grep -q "\`suites/smoke.toml\` plans $smoke\$" README.md && grep -q "^cases on the CPU backend" README.md && ok \
	|| bad "README's smoke count is not the plan's ($smoke)"
if "$MB" version | grep -q "cuda yes"; then
	nb=$("$MB" run suites/nam56r.toml --backend cuda --dry-run --dtypes bf16 | tail -n 1 | cut -d' ' -f1)
	na=$("$MB" run suites/nam56r.toml --backend cuda --dry-run | tail -n 1 | cut -d' ' -f1)
	sed -n '/^How long a run takes/,/^$/p' README.md | tr '\n' ' ' | grep -q "plans $nb cases in bf16 and $na in every dtype" \
		&& ok || bad "README's nam56r counts are not the plan's ($nb in bf16, $na in every dtype)"
fi

finish "review e2e"

#!/usr/bin/env bash
# Sharding end to end on the CPU backend, with GPUs simulated by
# cpu-backend workers (MEGABENCH_FAKE_GPUS, test only): --gpus 2 writes one
# valid receipt whose cases name both GPUs and are the cases of a --gpus 1
# run, each case with the wall time it cost; diff pairs every case of a
# sharded receipt with its one-GPU twin, same inputs and same errors, and
# refuses cases across GPUs over unlike topologies (exit 3); a deal
# learned from a receipt in which one row dominates splits that row and
# balances to within one case (--costs, and --save-to's store); a worker
# killed mid-run loses only its unfinished cases (crashed), of a split row
# too, and the receipt stays valid; a worker killed before Ctrl-C keeps
# its record; --gpus is refused where it cannot run.
set -u
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# the value of a Python expression over the receipt (a tuple when it has commas)
jq_py() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print(($2))" "$1"; }
export MEGABENCH_FAKE_GPUS=2
SUITE=suites/smoke.toml
planned=$("$MB" run "$SUITE" --backend cpu --dry-run | tail -n 1 | cut -d' ' -f1)

# 1. --gpus 2: one valid receipt, both GPUs used, every case of the plan
expect 0 "--gpus 2" -- "$MB" run "$SUITE" --backend cpu --gpus 2 --min-time 0 -o "$tmp/g2.json"
grep -q '^\[[0-9]*/[0-9]*\] ok .* gpu0 ' "$tmp/err" && grep -q '^\[[0-9]*/[0-9]*\] ok .* gpu1 ' "$tmp/err" \
	&& ok || bad "progress lines do not name their GPU: $(head -5 "$tmp/err")"
grep -q "^megabench: cost model: the bytes model (no receipt to learn from)" "$tmp/err" && ok || bad "no notice of the cost model"
grep -Eq '^gpu0 \(.*\): [0-9]+ cases in [0-9.]+ s$' "$tmp/out" && grep -Eq '^gpu1 \(.*\): [0-9]+ cases in [0-9.]+ s$' "$tmp/out" \
	&& ok || bad "the summary has no line per GPU"
tail -n 1 "$tmp/out" | grep -Eq "^$planned passed, 0 failed$" && ok || bad "last line: $(tail -n 1 "$tmp/out")"
expect 0 "the sharded receipt validates" -- "$MB" validate "$tmp/g2.json"
[ "$(jq_py "$tmp/g2.json" "r['gpu_count'], len(r['gpus']), sorted({c['gpu'] for c in r['cases']})")" = "(2, 2, [0, 1])" ] \
	&& ok || bad "gpu_count, gpus or the cases' GPUs: $(jq_py "$tmp/g2.json" "r.get('gpu_count'), [c.get('gpu') for c in r['cases']]")"
[ "$(jq_py "$tmp/g2.json" "len(r['cases'])")" = "$planned" ] && ok || bad "the sharded receipt does not hold the $planned planned cases"
[ "$(jq_py "$tmp/g2.json" "sum(s['cases'] for s in r['shards']) == len(r['cases']) and all(s['ended'] == 'exited with status 0' for s in r['shards'])")" = True ] \
	&& ok || bad "shards do not account for the cases: $(jq_py "$tmp/g2.json" "r['shards']")"
[ "$(jq_py "$tmp/g2.json" "r['topology']['source'], all(g.get('simulated') for g in r['gpus'])")" = "('none', True)" ] \
	&& ok || bad "simulated GPUs are not marked so"
[ "$(jq_py "$tmp/g2.json" "all(c['wall_ns'] > 0 for c in r['cases']), r['shard_plan']['cost_model'], r['shard_plan']['cases']")" \
	= "(True, 'bytes', {'measured': 0, 'estimated': 0, 'modeled': $planned})" ] \
	&& ok || bad "wall_ns per case or the shard plan: $(jq_py "$tmp/g2.json" "r.get('shard_plan')")"

# 2. the same case set, in the same order, as one GPU and as a plain run
expect 0 "--gpus 1" -- "$MB" run "$SUITE" --backend cpu --gpus 1 --min-time 0 -o "$tmp/g1.json"
expect 0 "plain run" -- "$MB" run "$SUITE" --backend cpu --min-time 0 -o "$tmp/plain.json"
ids() { jq_py "$1" "[c['id'] for c in r['cases']]"; }
[ "$(ids "$tmp/g1.json")" = "$(ids "$tmp/g2.json")" ] && ok || bad "--gpus 2 ran other cases than --gpus 1"
[ "$(ids "$tmp/plain.json")" = "$(ids "$tmp/g2.json")" ] && ok || bad "--gpus 2 ran other cases than a plain run"
[ "$(jq_py "$tmp/g1.json" "r['gpu_count'], {c['gpu'] for c in r['cases']}")" = "(1, {0})" ] && ok || bad "--gpus 1: gpu indices"

# 3. sharding alone never makes receipts incomparable, nor a field missing
for pair in "g1 g2" "plain g2" "g2 plain"; do
	read -r base head <<<"$pair"
	expect 0 "diff $base $head" -- "$MB" diff --format json "$tmp/$base.json" "$tmp/$head.json"
	"$MB" validate -q "$tmp/out" && ok || bad "diff $base $head: the JSON breaks schemas/diff.schema.json"
	[ "$("$PY" -c "import json,sys; d=json.load(sys.stdin); print(d['comparable'], [f for f in d['findings'] if f['kind'] == 'missing_field'])" <"$tmp/out")" = "True []" ] \
		&& ok || bad "diff $base $head: not comparable, or fields missing: $(head -c 600 "$tmp/out")"
done
#    case by case: every case of the sharded receipt pairs with its one-GPU
#    twin, with no finding, the same inputs and row sample and so the same
#    errors (cpu times are not judged: NOT JUDGED is diff's SAME for them)
expect 0 "diff g1 g2, case by case" -- "$MB" diff --format json "$tmp/g1.json" "$tmp/g2.json"
got=$("$PY" -c "import json,sys; d=json.load(sys.stdin); print(len(d['cases']), sorted({c['verdict'] for c in d['cases']}), d['findings'])" <"$tmp/out")
[ "$got" = "$planned ['NOT JUDGED'] []" ] && ok || bad "diff g1 g2 per case: $got"
"$PY" - "$tmp/g1.json" "$tmp/g2.json" <<'PY' && ok || bad "a sharded case's correctness differs from its one-GPU twin's"
import json, sys
keys = ("input_seed", "row_sample_seed", "rows_checked", "max_abs", "max_rel", "rel_l2", "over_tolerance", "norm_ratio")
a, b = ({c["id"]: c for c in json.load(open(p))["cases"]} for p in sys.argv[1:])
diff = [i for i in a if any(a[i]["correctness"].get(k) != b[i]["correctness"].get(k) for k in keys)]
sys.exit(1 if diff or a.keys() != b.keys() else 0)
PY

# 4. a case across GPUs compares only over the same topology class: the
#    same receipt with one case spanning both GPUs, over NVLink and over PCIe
"$PY" - "$tmp/g2.json" "$tmp" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["cases"][0]["collective"] = {"gpus": 2}
for kind in ("nvlink", "pcie"):
    for g in r["gpus"]:
        g.pop("simulated", None)
    r["topology"] = {"source": "nvml", "class": kind, "links": [{"a": 0, "b": 1, "kind": kind}]}
    json.dump(r, open("%s/%s.json" % (sys.argv[2], kind), "w"))
PY
expect 0 "a 2-GPU case over NVLink validates" -- "$MB" validate "$tmp/nvlink.json"
expect 3 "diff refuses NVLink against PCIe" -- "$MB" diff "$tmp/nvlink.json" "$tmp/pcie.json"
first=$(jq_py "$tmp/g2.json" "r['cases'][0]['id']")
grep -qF "GPUs differ for 1 case ($first spans 2 GPUs over topology nvlink in base, 2 over pcie in head)" "$tmp/out" "$tmp/err" \
	&& ok || bad "the refusal does not name the case and both topologies: $(cat "$tmp/out" "$tmp/err" | head -5)"
expect 3 "gate refuses it too" -- "$MB" gate --baseline "$tmp/nvlink.json" "$tmp/pcie.json"
expect 0 "the same topology compares" -- "$MB" diff "$tmp/nvlink.json" "$tmp/nvlink.json"
"$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); r['cases'][0]['gpu'] = 2; json.dump(r, open(sys.argv[2], 'w'))" \
	"$tmp/g2.json" "$tmp/badref.json"
expect 1 "a case naming a GPU the receipt lacks is invalid" -- "$MB" validate "$tmp/badref.json"
grep -q "/cases/0/gpu: names GPU 2; the receipt lists 2" "$tmp/err" && ok || bad "bad GPU reference: $(cat "$tmp/err")"

# 5. costs learned from a receipt (each case's wall_ns) in which one row,
#    recurrent_scan, dominates: 5 s a case, 10 ms every other. Dealt whole
#    it would end the run alone; it is split, and no GPU ends later than
#    the mean plus one case
"$PY" - "$tmp/g1.json" "$tmp/dominant.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["cases"]:
    c["wall_ns"] = 5 * 10**9 if c["row"] == "recurrent_scan" else 10**7
json.dump(r, open(sys.argv[2], "w"))
PY
total=$(jq_py "$tmp/dominant.json" "sum(c['wall_ns'] for c in r['cases']) / 1e9")
for n in 2 4; do
	expect 0 "--dry-run --gpus $n --costs" -- "$MB" run "$SUITE" --backend cpu --dry-run --gpus "$n" --costs "$tmp/dominant.json"
	grep -qF "cost model: learned from 1 receipt ($tmp/dominant.json): $planned cases measured (wall_ns)" "$tmp/out" \
		&& ok || bad "--gpus $n: the plan does not say it learned from the receipt: $(grep -v / "$tmp/out")"
	grep -qx "split across GPUs: recurrent_scan" "$tmp/out" && ok || bad "--gpus $n: recurrent_scan not split: $(grep -v / "$tmp/out")"
	"$PY" - "$tmp/out" "$n" "$total" <<'PY' && ok || bad "--gpus $n: the deal is not within one case of even: $(grep '^gpu' "$tmp/out")"
import re, sys
loads = [float(m.group(1)) for m in re.finditer(r"^gpu\d+: about ([0-9.]+) s:", open(sys.argv[1]).read(), re.M)]
n, total = int(sys.argv[2]), float(sys.argv[3])
# the shares add up to the total (each printed to 0.1 s), and the largest
# is at most the total over n plus one case, 5 s
sys.exit(0 if len(loads) == n and abs(sum(loads) - total) <= 0.05 * n + 1e-9 and max(loads) <= total / n + 5 + 0.05 else 1)
PY
done
expect 0 "--dry-run --gpus 2, bytes model" -- "$MB" run "$SUITE" --backend cpu --dry-run --gpus 2
grep -q "^cost model: the bytes model (no receipt to learn from)" "$tmp/out" && ok || bad "the plan does not name the bytes model"
MEGABENCH_FAKE_GPUS='' expect 0 "--dry-run --gpus 8 with no GPU to run on" -- "$MB" run "$SUITE" --backend cpu --dry-run --gpus 8
[ "$(grep -c '^gpu[0-7]: about' "$tmp/out")" = 8 ] && ok || bad "the dry run does not deal over 8 GPUs: $(grep '^gpu' "$tmp/out")"
#    --save-to's store: the newest receipt of the suite there
expect 0 "--save-to, first" -- "$MB" run "$SUITE" --backend cpu --rows relu2,swiglu --gpus 2 --min-time 0 --save-to "$tmp/store"
grep -q "^megabench: --save-to $tmp/store: no receipt of suite smoke on the cpu backend to learn costs from: the bytes model" "$tmp/err" \
	&& ok || bad "an empty store is not said: $(grep 'cost\|save-to' "$tmp/err")"
expect 0 "--save-to, then a dry run" -- "$MB" run "$SUITE" --backend cpu --rows relu2,swiglu --gpus 2 --dry-run --save-to "$tmp/store"
grep -q "^cost model: learned from 1 receipt ($tmp/store/.*-smoke-.*\.json): 12 cases measured" "$tmp/out" \
	&& ok || bad "the store's receipt is not learned from: $(grep -v / "$tmp/out")"
#    what --costs refuses
expect 64 "--costs without --gpus" -- "$MB" run "$SUITE" --backend cpu --costs "$tmp/dominant.json"
expect 2 "--costs of a missing file" -- "$MB" run "$SUITE" --backend cpu --gpus 2 --dry-run --costs "$tmp/none.json"
grep -qF "$tmp/none.json" "$tmp/err" && ok || bad "a missing --costs file is not named: $(cat "$tmp/err")"
"$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); r['cases'][0]['wall_ns'] = -1; json.dump(r, open(sys.argv[2], 'w'))" \
	"$tmp/dominant.json" "$tmp/negative.json"
expect 2 "--costs of a receipt with a negative wall_ns" -- "$MB" run "$SUITE" --backend cpu --gpus 2 --dry-run --costs "$tmp/negative.json"
grep -qF "$tmp/negative.json: /cases/0/wall_ns" "$tmp/err" && ok || bad "the bad field is not named: $(cat "$tmp/err")"
mkdir "$tmp/mixed" && cp "$tmp/dominant.json" "$tmp/mixed/a.json" && echo '{}' >"$tmp/mixed/b.json"
expect 0 "--costs of a folder" -- "$MB" run "$SUITE" --backend cpu --gpus 2 --dry-run --costs "$tmp/mixed"
grep -qF "note: --costs $tmp/mixed: $tmp/mixed/b.json passed over" "$tmp/out" && grep -qF "learned from 1 receipt ($tmp/mixed/a.json)" "$tmp/out" \
	&& ok || bad "a folder's receipts: $(grep -v / "$tmp/out")"

# 6. a worker killed mid-run: its unfinished cases crashed, the rest kept;
#    the deal learned from the receipt above splits recurrent_scan over
#    both GPUs, and gpu0's part of it is kept whole
"$MB" run "$SUITE" --backend cpu --gpus 2 --min-time 0.2 --costs "$tmp/dominant.json" -o "$tmp/kill.json" >"$tmp/kill.out" 2>"$tmp/kill.err" &
run=$!
worker=""
for _ in $(seq 1 300); do
	worker=$(sed -n 's/^megabench: gpu1 (.*): worker pid \([0-9]*\) runs.*/\1/p' "$tmp/kill.err")
	[ -n "$worker" ] && grep -q '^\[[0-9]*/[0-9]*\] ok .* gpu1 ' "$tmp/kill.err" && break
	sleep 0.1
done
if [ -n "$worker" ]; then kill -KILL "$worker"; else bad "no worker pid for gpu1 in the progress"; fi
wait "$run"; code=$?
[ "$code" = 1 ] && ok || bad "a run with a killed worker exits $code, expected 1"
expect 0 "the receipt of a run with a killed worker validates" -- "$MB" validate "$tmp/kill.json"
[ "$(jq_py "$tmp/kill.json" "len(r['cases'])")" = "$planned" ] && ok || bad "the killed run's receipt lacks cases"
got=$(jq_py "$tmp/kill.json" "sorted({(c['gpu'], c['status']) for c in r['cases']})")
[ "$got" = "[(0, 'ok'), (1, 'crashed'), (1, 'ok')]" ] && ok || bad "statuses by GPU after the kill: $got"
[ "$(jq_py "$tmp/kill.json" "all('killed by signal 9' in c['error'] for c in r['cases'] if c['status'] == 'crashed')")" = True ] \
	&& ok || bad "a crashed case does not say its worker was killed"
[ "$(jq_py "$tmp/kill.json" "r['status'], r['shards'][1]['ended']")" = "('complete', 'killed by signal 9 (Killed)')" ] \
	&& ok || bad "status or shard end: $(jq_py "$tmp/kill.json" "r['status'], r['shards']")"
grep -q "^gpu1 (.*): .* cases in .* s; its worker killed by signal 9" "$tmp/kill.out" && ok || bad "the summary does not say gpu1's worker was killed"
got=$(jq_py "$tmp/kill.json" "sorted({c['gpu'] for c in r['cases'] if c['row'] == 'recurrent_scan'}), all(c['status'] == 'ok' for c in r['cases'] if c['gpu'] == 0), r['shard_plan']['split_rows']")
[ "$got" = "([0, 1], True, ['recurrent_scan'])" ] && ok || bad "the split row after the kill: $got"

# 6b. a worker killed, then the run interrupted: the dead worker's record
#     is kept (its unfinished cases crashed, a notice that it died); the
#     live worker's unfinished cases are left out, as in any interrupted run
"$MB" run "$SUITE" --backend cpu --gpus 2 --min-time 0.2 -o "$tmp/killint.json" >"$tmp/killint.out" 2>"$tmp/killint.err" &
run=$!
worker=""
for _ in $(seq 1 300); do
	worker=$(sed -n 's/^megabench: gpu1 (.*): worker pid \([0-9]*\) runs.*/\1/p' "$tmp/killint.err" 2>/dev/null)
	[ -n "$worker" ] && grep -q '^\[[0-9]*/[0-9]*\] ok .* gpu1 ' "$tmp/killint.err" && break
	sleep 0.1
done
if [ -n "$worker" ]; then kill -KILL "$worker"; else bad "no worker pid for gpu1 in the progress"; fi
# the parent sees the worker's pipe close at once; give it a moment, then Ctrl-C
sleep 1
kill -INT "$run"
wait "$run"; code=$?
[ "$code" = 130 ] && ok || bad "a killed worker, then Ctrl-C: exit $code, expected 130"
expect 0 "that receipt validates" -- "$MB" validate "$tmp/killint.json"
[ "$(jq_py "$tmp/killint.json" "r['status']")" = interrupted ] && ok || bad "the run is not marked interrupted"
got=$(jq_py "$tmp/killint.json" "sorted({c['status'] for c in r['cases'] if c['gpu'] == 1})")
[ "$got" = "['crashed', 'ok']" ] && ok || bad "gpu1's cases after its worker was killed, then Ctrl-C: $got"
"$PY" - "$tmp/killint.json" "$tmp/g2.json" <<'PY' && ok || bad "gpu1's unfinished cases are not all there, crashed, killed by signal 9"
import json, sys
r, full = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
mine = [c for c in r["cases"] if c["gpu"] == 1]
# every case of the rows dealt to gpu1, and of a row split over GPUs as
# many as gpu1 was dealt
rows, split = set(r["shards"][1]["rows"]), {s["row"]: s["cases"] for s in r["shards"][1].get("split_rows", [])}
whole = {c["id"] for c in full["cases"] if c["row"] in rows and c["row"] not in split}
assert whole <= {c["id"] for c in mine} and len(mine) == len(whole) + sum(split.values()), "cases"
assert all(sum(c["row"] == row for c in mine) == n for row, n in split.items()), "split rows"
assert all("killed by signal 9" in c["error"] for c in mine if c["status"] == "crashed"), "errors"
PY
grep -q "gpu1 (.*): its worker (pid $worker) was killed by signal 9 .*: its [0-9]* unfinished cases* .*recorded crashed" "$tmp/killint.err" \
	&& ok || bad "no notice says gpu1's worker died: $(grep -i 'gpu1' "$tmp/killint.err" | tail -3)"
[ "$(jq_py "$tmp/killint.json" "any(c['status'] == 'crashed' for c in r['cases'] if c['gpu'] == 0)")" = False ] \
	&& ok || bad "gpu0, stopped by Ctrl-C, has crashed cases"

# 7. where --gpus cannot run, or does not add up
expect 0 "--devices 1 --gpus 1 runs on GPU 1" -- "$MB" run "$SUITE" --backend cpu --rows relu2 --devices 1 --gpus 1 --min-time 0 -o "$tmp/d1.json"
[ "$(jq_py "$tmp/d1.json" "[g['index'] for g in r['gpus']], {c['gpu'] for c in r['cases']}")" = "([1], {0})" ] \
	&& ok || bad "--devices 1: the receipt's GPU"
expect 0 "--dry-run --gpus 2" -- "$MB" run "$SUITE" --backend cpu --dry-run --gpus 2
grep -Eq '^gpu0: about [0-9.]+ s: .*; [0-9]+ cases$' "$tmp/out" && grep -Eq '^gpu1: about' "$tmp/out" \
	&& tail -n 1 "$tmp/out" | grep -q "^$planned cases$" && ok || bad "dry run with --gpus: $(tail -n 4 "$tmp/out")"
expect 2 "--gpus 3 of 2 simulated GPUs" -- "$MB" run "$SUITE" --backend cpu --gpus 3 -o "$tmp/x.json"
grep -q "3 GPUs asked for: this host has 2" "$tmp/err" && ok || bad "too many GPUs: $(cat "$tmp/err")"
expect 64 "--gpus 3 with two --devices" -- "$MB" run "$SUITE" --backend cpu --gpus 3 --devices 0,1 -o "$tmp/x.json"
expect 64 "--gpus 0" -- "$MB" run "$SUITE" --backend cpu --gpus 0 -o "$tmp/x.json"
MEGABENCH_FAKE_GPUS='' expect 2 "--gpus on the cpu backend" -- "$MB" run "$SUITE" --backend cpu --gpus 2 -o "$tmp/x.json"
grep -q "the cpu backend has no GPUs" "$tmp/err" && ok || bad "cpu backend refusal: $(cat "$tmp/err")"
[ ! -e "$tmp/x.json" ] && ok || bad "a refused run wrote a receipt"

finish "shard e2e"

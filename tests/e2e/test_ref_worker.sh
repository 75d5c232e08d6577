#!/usr/bin/env bash
# The reference worker (src/harness/ref_cache.h) on the CPU backend, where
# MEGABENCH_REF_WORKER=all sends every group through it: the cases check
# against exactly what the row children compute themselves, a worker that
# dies or cannot start loses nothing, and its folder never outlives the run
# (Ctrl-C included).
set -u
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
export TMPDIR="$tmp/t"
mkdir -p "$TMPDIR"

# the correctness of every case of two receipts, field by field
same_checks() {
	"$PY" - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ("max_abs", "max_rel", "rel_l2", "norm_ratio", "over_tolerance", "rows_checked", "input_seed",
        "row_sample_seed", "passed")
ca = {c["id"]: c["correctness"] for c in a["cases"]}
cb = {c["id"]: c["correctness"] for c in b["cases"]}
diff = [(i, k) for i in ca for k in keys if i not in cb or ca[i].get(k) != cb[i].get(k)]
for d in diff[:5]:
    print("differs:", *d, file=sys.stderr)
sys.exit(1 if diff or len(ca) != len(cb) or not ca else 0)
PY
}
# the smoke suite, sampled briefly: the checks, not the times, are compared
smoke=(run suites/smoke.toml --backend cpu --set timing.min_time_s=0.01)
leftover() { find "$TMPDIR" -maxdepth 1 -name 'megabench-ref-*' | grep -q .; }

# 1. every group from the worker: the same checks as without it
MEGABENCH_REF_WORKER=0 expect 0 "run without the worker" -- "$MB" "${smoke[@]}" -o "$tmp/a.json"
MEGABENCH_REF_WORKER=all MEGABENCH_TRACE=1 expect 0 "run with every group from the worker" -- \
	"$MB" "${smoke[@]}" -o "$tmp/b.json"
same_checks "$tmp/a.json" "$tmp/b.json" && ok || bad "checks differ with the worker"
grep -q "taken from the reference worker" "$tmp/err" && ok || bad "no group was taken from the worker"
leftover && bad "the worker's folder outlived the run" || ok

# 2. a worker killed at once: the row children compute what it left
MEGABENCH_REF_WORKER=all "$MB" "${smoke[@]}" -o "$tmp/c.json" >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 50); do
	worker=$(ps -o pid= --ppid "$pid" | head -n 1)
	[ -n "$worker" ] && break
	sleep 0.02
done
[ -n "${worker:-}" ] && kill -KILL "$worker" 2>/dev/null
wait "$pid" && ok || bad "run with a killed worker: exit $?"
same_checks "$tmp/a.json" "$tmp/c.json" && ok || bad "checks differ after the worker was killed"
leftover && bad "the killed worker's folder outlived the run" || ok

# 3. a worker that cannot start: said in the receipt, nothing lost
TMPDIR="$tmp/none" MEGABENCH_REF_WORKER=all expect 0 "run where the worker cannot start" -- \
	"$MB" "${smoke[@]}" -o "$tmp/d.json"
same_checks "$tmp/a.json" "$tmp/d.json" && ok || bad "checks differ without a worker folder"
grep -q "reference worker not started" "$tmp/d.json" && ok || bad "the receipt does not say the worker did not start"

# 4. Ctrl-C: an interrupted receipt, and no folder left behind
MEGABENCH_REF_WORKER=all "$MB" "${smoke[@]}" -o "$tmp/e.json" >"$tmp/out" 2>"$tmp/err" &
pid=$!
sleep 0.5
kill -INT "$pid"
wait "$pid"
[ -s "$tmp/e.json" ] && ok || bad "no receipt after Ctrl-C"
leftover && bad "the worker's folder outlived a Ctrl-C" || ok

finish ref_worker_e2e

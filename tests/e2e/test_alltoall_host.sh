#!/usr/bin/env bash
# megabench alltoall end to end on the CPU: megabench-host-ranks runs the
# multi-rank backend, its world, the case driver, the receipt and the table
# against a host stand-in for CUDA, NCCL and moe_alltoall's device side
# (tests/host_ranks/host_ranks.c). Every variant at two sizes on two ranks
# is exact, checked against the routing and the reference, and the receipt
# validates, records each case's bandwidths as nccl-tests defines them and
# the GPUs, prints the table, and diffs with a second run of one setting;
# four ranks, fp32 and fp16, a sweep, --check and an odd row width run too;
# a row moved wrongly fails every variant; a failed call ends the run, the
# rest recorded as not run; Ctrl-C writes what finished, marked
# interrupted; a shape the ranks cannot take and one GPU are refused.
set -u
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
HR=${MEGABENCH_HOST_RANKS:?}
small=(--hidden 64 --experts 8 --topk 3 --samples 4 --warmup 1)

cases_ok() { # cases_ok RECEIPT GPUS: every case ok, its record complete
	"$PY" - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
g = int(sys.argv[2])
assert r["status"] == "complete" and r["gpu_count"] == g == len(r["gpus"]), r.get("error")
assert r["topology"]["class"] == "nvlink", r["topology"]
for c in r["cases"]:
    assert c["status"] == "ok", (c["id"], c["error"])
    k, coll = c["correctness"], c["collective"]
    assert k["passed"] and k["rows_total"] > 0, c["id"]
    assert coll["gpus"] == g and coll["wrong"] == 0 and len(coll["ranks"]) == g, c["id"]
    assert c["throughput"]["bytes"] == coll["bytes_per_rank"] > 0, c["id"]
    assert abs(coll["algbw_gbps"] - coll["bytes_per_rank"] / c["timing"]["median_ns"]) < 1e-9, c["id"]
    assert abs(coll["busbw_gbps"] - coll["algbw_gbps"] * (g - 1) / g) < 1e-9, c["id"]
    assert all(x["passed"] and x["rows_hashed"] > 0 and x["misplaced"] == 0 for x in coll["ranks"]), c["id"]
    if c["variant_kind"] == "vendor":
        assert coll["moves_only"] and k["tolerance"]["rel"] == 0 and k["reference"].startswith("the rows sent")
    else:
        assert k["rows_total"] == g * c["shape"]["T"] and k["max_rel"] is not None, c["id"]
    # the last checked call is timed too
    assert len(c["timing"]["samples_ns"]) == r["settings"]["max_samples"] + 1, c["id"]
PY
}

# two ranks, every variant, two sizes
expect 0 "two ranks" -- "$HR" alltoall --gpus 2 -T 64,200 "${small[@]}" -o "$tmp/a.json"
"$MB" validate "$tmp/a.json" >/dev/null && ok || bad "a.json does not validate"
cases_ok "$tmp/a.json" 2 && ok || bad "two ranks: cases"
[ "$(grep -c "^ *\(64\|200\) .* bf16  \(grouped_sendrecv\|fused\|nccl_alltoall\|nccl_sendrecv\) " "$tmp/out")" = 8 ] \
	&& ok || { bad "the table has not a line per size and variant"; cat "$tmp/out" >&2; }
grep -q "^# Out of bounds values : 0 OK" "$tmp/out" && [ "$(grep -c "^# Avg bus bandwidth    : " "$tmp/out")" = 4 ] \
	&& ok || bad "no closing lines as nccl-tests prints them"
grep -q "receipt written to $tmp/a.json" "$tmp/err" && ok || bad "no word of the receipt"
# a second run of one setting: the two receipts compare
expect 0 "again" -- "$HR" alltoall --gpus 2 -T 64,200 "${small[@]}" -q -o "$tmp/b.json"
expect 0 "diff of two runs" -- "$MB" diff "$tmp/a.json" "$tmp/b.json"
grep -q "8 same" "$tmp/out" && ok || { bad "two runs of one setting are not the same"; cat "$tmp/out" >&2; }

# four ranks in fp32; a sweep in fp16; --check with 272-byte rows
MB_HOST_RANKS_GPUS=4 expect 0 "four ranks" -- "$HR" alltoall --gpus all -T 100 --hidden 64 --experts 16 --topk 4 \
	--dtype fp32 --samples 3 --warmup 0 -q -o "$tmp/four.json"
cases_ok "$tmp/four.json" 4 && ok || bad "four ranks: cases"
MB_HOST_RANKS_GPUS=4 expect 0 "a sweep" -- "$HR" alltoall --gpus 4 -b 16 -e 256 -f 4 --hidden 32 --experts 8 \
	--dtype fp16 --variants fused,nccl_sendrecv --samples 3 -q -o "$tmp/sweep.json"
cases_ok "$tmp/sweep.json" 4 && ok || bad "sweep: cases"
"$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); assert [c['shape']['T'] for c in r['cases']] == [16,16,64,64,256,256]" \
	"$tmp/sweep.json" && ok || bad "the sweep did not run 16, 64, 256"
expect 0 "--check" -- "$HR" alltoall --gpus 2 -T 300 --hidden 136 --experts 8 --topk 3 --check --samples 2 -q \
	-o "$tmp/check.json"
cases_ok "$tmp/check.json" 2 && ok || bad "--check: cases"
"$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); assert all(c['correctness']['rows_checked'] == c['correctness']['rows_total'] for c in r['cases'])" \
	"$tmp/check.json" && ok || bad "--check did not compare every row"

# a bit flipped in a received row: every variant fails, and says which row
MB_HOST_RANKS_CORRUPT=1 expect 1 "a row moved wrongly" -- "$HR" alltoall --gpus 2 -T 64 "${small[@]}" -q \
	-o "$tmp/bad.json"
"$MB" validate "$tmp/bad.json" >/dev/null && ok || bad "bad.json does not validate"
"$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); assert all(c['status'] == 'failed' and 'not where they belong' in c['error'] and c['collective']['wrong'] > 0 for c in r['cases']), [c['error'] for c in r['cases']]" \
	"$tmp/bad.json" && ok || bad "a row moved wrongly passed"
grep -q "^# Out of bounds values : [1-9][0-9]* FAILED" "$tmp/out" && ok || bad "the table does not say FAILED"

# a call that fails: that case crashed, the rest not run, the receipt failed
MB_HOST_RANKS_FAIL_CALL=30 expect 1 "a failed call" -- "$HR" alltoall --gpus 2 -T 64,200 "${small[@]}" -q \
	-o "$tmp/fail.json"
"$MB" validate "$tmp/fail.json" >/dev/null && ok || bad "fail.json does not validate"
"$PY" - "$tmp/fail.json" <<'PY' && ok || bad "a failed call: not crashed then skipped"
import json, sys
r = json.load(open(sys.argv[1]))
s = [c["status"] for c in r["cases"]]
i = s.index("crashed")
assert r["status"] == "failed" and "failed before it" in r["error"], r.get("error")
assert s[:i] == ["ok"] * i and s[i + 1:] == ["skipped"] * (8 - i - 1), s
assert all(r["cases"][i]["id"] in c["error"] for c in r["cases"][i + 1:])
PY

# Ctrl-C: the cases that finished, marked interrupted, exit 130
MB_HOST_RANKS_SLOW_US=20000 "$HR" alltoall --gpus 2 -T 64,200 --hidden 64 --experts 8 --topk 3 --samples 20 \
	-o "$tmp/int.json" >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do grep -q "\[2/8\]" "$tmp/err" 2>/dev/null && break; sleep 0.1; done
kill -INT "$pid"
wait "$pid"
[ $? = 130 ] && ok || bad "Ctrl-C: exit not 130"
"$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['status'] == 'interrupted' and 0 < len(r['cases']) < 8" \
	"$tmp/int.json" && ok || bad "Ctrl-C: no receipt of what finished"

# refused: a GPU count the experts cannot be spread over, one GPU
MB_HOST_RANKS_GPUS=4 expect 2 "--gpus 3" -- "$HR" alltoall --gpus 3 -T 100 -o "$tmp/three.json"
grep -q "G must divide E" "$tmp/err" && [ ! -e "$tmp/three.json" ] && ok || bad "--gpus 3 not refused as it should"
MB_HOST_RANKS_GPUS=1 expect 2 "one GPU" -- "$HR" alltoall -o "$tmp/one.json"
grep -q "needs at least 2 GPUs" "$tmp/err" && [ ! -e "$tmp/one.json" ] && ok || bad "one GPU not refused"
finish test_alltoall_host

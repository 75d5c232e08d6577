#!/usr/bin/env bash
# megabench alltoall (the moe_alltoall row across GPUs with NCCL): usage
# errors (the size sweep's too), and the refusals of a host that cannot run
# it (no NCCL, fewer than 2 GPUs, an MPI launcher for a build without MPI)
# with exit 2, a message that says why, and nothing written. On a host with
# two or more GPUs the command runs small cases of every variant in every
# dtype, both row widths the kernels handle (16-byte rows and 2-byte tails),
# with --check, and the receipt must validate with every case correct, its
# bandwidths and GPUs recorded, and the table as nccl-tests prints one; a
# sweep runs every size it names; two receipts of one setting diff.
set -u
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

expect 0 "--help" -- "$MB" alltoall --help
grep -q "busbw" "$tmp/out" && grep -q "NCCL_NVLS_ENABLE=0" "$tmp/out" && ok || bad "--help says nothing of busbw or NVLS"
"$MB" --help | grep -q "^  alltoall " && ok || bad "megabench --help does not list alltoall"

for args in "--gpus 0" "--gpus two" "--tokens 4096,x" "--tokens 0" "--variants fused,grouped" "--topk 9" \
	"--dtype fp8" "--samples 0" "--hidden -1" "extra-operand" "-b 8K -e 4K" "-f 2" "-f 1 -b 4" "-T 4096 -b 1K" \
	"-b 4X"; do
	# shellcheck disable=SC2086
	expect 64 "alltoall $args" -- "$MB" alltoall $args -o "$tmp/never.json"
	grep -q "see 'megabench alltoall --help'" "$tmp/err" && ok || bad "alltoall $args: no usage hint"
done
[ ! -e "$tmp/never.json" ] && ok || bad "a usage error wrote a receipt"

# Without two GPUs and NCCL: exit 2, why, and nothing written (no receipts/
# folder appears where it ran either).
mkdir -p "$tmp/cwd"
(cd "$tmp/cwd" && "$MB" alltoall -q -T 256 --hidden 256 --samples 1 --warmup 0 >"$tmp/out" 2>"$tmp/err")
rc=$?
if [ $rc = 2 ]; then
	grep -Eq "needs at least 2 GPUs|built without (CUDA|NCCL)|CUDA device" "$tmp/err" && ok || {
		bad "refusal does not say why"; cat "$tmp/err" >&2; }
	[ ! -e "$tmp/cwd/receipts" ] && ok || bad "a refused run made receipts/"
	# an MPI launcher's environment, for a build without MPI: refused, not
	# every process driving every GPU
	if ! ldd "$MB" 2>/dev/null | grep -q libmpi; then
		OMPI_COMM_WORLD_SIZE=2 "$MB" alltoall -o "$tmp/mpi.json" >"$tmp/out" 2>"$tmp/err"
		rc=$?
		{ [ $rc = 2 ] && grep -Eq "without MPI|built without (CUDA|NCCL)" "$tmp/err"; } && ok \
			|| { bad "under a launcher without MPI: exit $rc"; cat "$tmp/err" >&2; }
		[ ! -e "$tmp/mpi.json" ] && ok || bad "the MPI refusal wrote a receipt"
	fi
	finish test_alltoall
	exit
fi

# Two or more GPUs: the real thing, small.
[ $rc = 0 ] || [ $rc = 1 ] || { bad "alltoall on this host: exit $rc"; cat "$tmp/err" >&2; }
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
run_case() { # run_case NAME ARGS...: runs, validates, every case ok
	local name=$1; shift
	"$MB" alltoall -q --samples 3 --warmup 1 --check -o "$tmp/$name.json" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	[ $rc = 0 ] && ok || { bad "$name: exit $rc"; cat "$tmp/err" "$tmp/out" >&2; }
	"$MB" validate "$tmp/$name.json" >/dev/null 2>&1 && ok || bad "$name: the receipt does not validate"
	"$PY" - "$tmp/$name.json" "$@" <<'PY' && ok || bad "$name: cases"
import json, sys
r = json.load(open(sys.argv[1]))
cases = r["cases"]
assert cases, "no cases"
for c in cases:
    assert c["row"] == "moe_alltoall", c["id"]
    assert c["status"] == "ok", (c["id"], c["status"], c.get("error"), c["findings"])
    assert c["correctness"]["passed"], c["id"]
    assert c["throughput"]["gbps"] > 0, c["id"]
    assert c["shape"]["G"] >= 2, c["id"]
    coll = c["collective"]
    assert coll["gpus"] == c["shape"]["G"] and coll["busbw_gbps"] > 0 and coll["wrong"] == 0, c["id"]
    assert abs(coll["busbw_gbps"] - coll["algbw_gbps"] * (coll["gpus"] - 1) / coll["gpus"]) < 1e-9, c["id"]
    assert all(x["passed"] and x["rows_hashed"] > 0 for x in coll["ranks"]), c["id"]
    if c["variant_kind"] == "vendor":
        assert c["correctness"]["tolerance"]["rel"] == 0, c["id"]
assert r["gpu_count"] == len(r["gpus"]) == cases[0]["shape"]["G"], "gpus"
PY
	grep -q "^# Out of bounds values : 0 OK" "$tmp/out" && grep -q "^# Avg bus bandwidth" "$tmp/out" && ok \
		|| { bad "$name: no table as nccl-tests prints one"; cat "$tmp/out" >&2; }
}
# 2-byte rows (H = 136 bf16: 272 bytes), T not a multiple of a block
run_case narrow -T 256,1000 --hidden 136 --experts 8 --topk 3 --gpus 2
# 16-byte rows, every dtype
for dt in bf16 fp16 fp32; do
	run_case "wide-$dt" -T 512 --hidden 256 --dtype "$dt" --gpus 2
done
if [ "$gpus" -ge 4 ]; then
	run_case four -T 700 --hidden 512 --gpus 4
	expect 2 "--gpus 3 with 64 experts" -- "$MB" alltoall --gpus 3 -o "$tmp/three.json"
	grep -q "divide" "$tmp/err" && ok || bad "--gpus 3: the message does not say G must divide E"
fi
# a sweep: 256, 512, 1024 tokens per GPU, one line each
run_case sweep -b 256 -e 1K -f 2 --hidden 256 --variants fused --gpus 2
[ "$(grep -c "^ *\(256\|512\|1024\) .* fused " "$tmp/out")" = 3 ] && ok || bad "sweep: not three sizes"
# two receipts of one setting compare (same GPU count and links)
run_case again -b 256 -e 1K -f 2 --hidden 256 --variants fused --gpus 2
"$MB" diff "$tmp/sweep.json" "$tmp/again.json" >"$tmp/out" 2>"$tmp/err"
[ $? != 3 ] && ok || { bad "two alltoall receipts of one setting are refused"; cat "$tmp/out" "$tmp/err" >&2; }
# an existing receipt is not replaced without --force
expect 2 "existing output" -- "$MB" alltoall -T 256 --samples 1 --gpus 2 -o "$tmp/narrow.json"
finish test_alltoall

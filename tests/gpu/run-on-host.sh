#!/bin/bash
# Run the GPU checks on a GPU host from a bundle made here with
#   /work/shared/gpu/bundle.sh .gpu build-gpu/megabench build-gpu/tests/test_cuda_backend
# then, on the host, from the repository root:
#   tests/gpu/run-on-host.sh [BUNDLE_DIR]     (default .gpu)
# Logs and JSON go under $OUT (default ./gpu-out). Exit status: non-zero when
# any step failed; every step runs regardless, so one call gives the whole
# picture.
set -u
bundle=${1:-.gpu}
out=${OUT:-gpu-out}
mkdir -p "$out"
# shellcheck disable=SC1091
source "$bundle/env.sh"
status=0

step() {
	local name=$1; shift
	local t0=$SECONDS
	"$@" >"$out/$name.log" 2>&1
	local rc=$?
	echo "== $name: exit $rc in $((SECONDS - t0)) s"
	tail -n 40 "$out/$name.log"
	if [ "$rc" != 0 ]; then status=1; fi
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
	--format=csv >"$out/nvidia-smi.csv" 2>&1
cat "$out/nvidia-smi.csv"

MB_GPU_TEST_OUT=$out/test_cuda_backend.json step test_cuda_backend "$bundle/bin/test_cuda_backend"
# The smoke suite end to end through the CLI, isolation included.
step smoke "$bundle/bin/megabench" run suites/smoke.toml --backend cuda -o "$out/smoke.json"
# The broken test rows through the CLI: exit 1 is expected (wrong answers,
# a crash and a hang); what matters is each case's status in the receipt.
"$bundle/bin/megabench" run tests/e2e/faults.toml --backend cuda -o "$out/faults.json" >"$out/faults.log" 2>&1
echo "== faults: exit $? (1 expected)"
tail -n 20 "$out/faults.log"
exit $status

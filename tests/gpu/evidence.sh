#!/bin/bash
# The measurements issue 3 asks for, on a GPU host, from a bundle made here:
#   /work/shared/gpu/bundle.sh .gpu build/megabench build/tests/test_cuda_backend
#   tests/gpu/evidence.sh PHASE...     (on the host, from the repo root)
# checks:   the GPU unit test and the broken test rows.
# accuracy: rope_qk fused at the largest nam56r shape and the copy probe,
#           against ncu and CUDA events.
# memcheck: compute-sanitizer memcheck over every variant at smoke shapes.
# repeat:   the rope_qk and residual_rmsnorm rows of suites/nam56r.toml
#           twice, back to back: repeatability, convergence, goodput.
# smoke:    every row of suites/smoke.toml on the GPU (correctness).
# rows-a, rows-b: suites/nam56r.toml in two halves (issue 5), summarised by
#           tests/gpu/rows_summary.py.
# sass:     16-byte load and store counts of every fused kernel.
# Everything lands under $OUT (default ./gpu-out).
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
# shellcheck disable=SC1091
source .gpu/env.sh
mb=.gpu/bin/megabench
# the device gets a copy of the tree with an empty .git of its own: put the
# packed one in its place so that receipts carry the commit
if [ -d .gpu/dotgit ]; then
	rm -rf .git && cp -r .gpu/dotgit .git
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,ecc.mode.current \
	--format=csv > "$out/nvidia-smi.csv" 2>&1
cat "$out/nvidia-smi.csv"

step() { # step NAME LIMIT_S command...
	local name=$1 limit=$2; shift 2
	local t0=$SECONDS
	timeout "$limit" "$@" > "$out/$name.log" 2>&1
	local rc=$?
	echo "== $name: exit $rc in $((SECONDS - t0)) s"
	tail -n 25 "$out/$name.log"
}

for phase in "${@:-checks}"; do
case $phase in
checks)
	MB_GPU_TEST_OUT=$out/test_cuda_backend.json step test_cuda_backend 150 .gpu/bin/test_cuda_backend
	step faults 120 $mb run tests/e2e/faults.toml --backend cuda -o "$out/faults.json"
	python3 -c "import json,sys; r=json.load(open(sys.argv[1])); [print(c['row'], c['variant'], c['status'], (c['error'] or '')[:90]) for c in r['cases']]" "$out/faults.json"
	;;
accuracy)
	step accuracy 90 $mb run tests/gpu/accuracy.toml --backend cuda -o "$out/accuracy.json"
	step ncu 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$out/ncu.csv" \
		-k "regex:mb_ceiling_copy_kernel|rope_qk_fused" -c 120 \
		$mb run tests/gpu/accuracy.toml --backend cuda --min-time 0 -o "$out/accuracy-under-ncu.json"
	python3 tests/gpu/accuracy.py "$out/accuracy.json" "$out/ncu.csv" | tee "$out/accuracy.txt"
	;;
memcheck)
	MEGABENCH_SKIP_CEILINGS=1 step memcheck 240 compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 \
		$mb run tests/gpu/memcheck.toml --backend cuda -o "$out/memcheck.json"
	grep -E "ERROR SUMMARY" "$out/memcheck.log" | sort | uniq -c
	;;
repeat)
	for run in a b; do
		step "nam56r-$run" 280 $mb run suites/nam56r.toml --backend cuda --rows rope_qk,residual_rmsnorm \
			-o "$out/nam56r-$run.json"
	done
	python3 - "$out/nam56r-a.json" "$out/nam56r-b.json" <<'PY' | tee "$out/repeat.txt"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ma = {c["id"]: c for c in a["cases"]}
agree = total = conv = 0
for c in b["cases"]:
    o = ma.get(c["id"])
    if not (o and o["timing"] and c["timing"]):
        continue
    total += 1
    r = c["timing"]["median_ns"] / o["timing"]["median_ns"]
    agree += abs(r - 1) <= 0.01
    print("%-70s %10.1f %10.1f  x%.4f" % (c["id"], o["timing"]["median_ns"], c["timing"]["median_ns"], r))
for r in (a, b):
    cs = [c for c in r["cases"] if c["timing"]]
    conv += sum(c["timing"]["converged"] for c in cs)
n = sum(1 for r in (a, b) for c in r["cases"] if c["timing"])
print("repeatability: %d of %d cases agree within 1%% (%.1f%%)" % (agree, total, 100.0 * agree / max(total, 1)))
print("convergence: %d of %d cases converged (%.1f%%)" % (conv, n, 100.0 * conv / max(n, 1)))
g = a["goodput"]
print("goodput run a: wall %.2f s, goodput %.1f%%" % (g["wall_ns"] / 1e9, 100 * g["goodput_fraction"]))
for k, v in g["badput_ns"].items():
    print("  %-17s %8.2f s  %5.1f%%" % (k, v / 1e9, 100.0 * v / g["wall_ns"]))
PY
	;;
smoke)
	step smoke-gpu 200 $mb run suites/smoke.toml --backend cuda -o "$out/smoke-gpu.json"
	grep -E "passed|FAIL|crashed|timeout|skipped" "$out/smoke-gpu.log" | tail -n 15
	;;
rows-a)
	step rows-a 420 $mb run suites/nam56r.toml --backend cuda \
		--rows rope_qk,rope_qk_bwd,mla_partial_rope,row_gather,row_gather_pair -o "$out/rows-a.json"
	python3 tests/gpu/rows_summary.py "$out/rows-a.json" | tee "$out/rows-a.txt"
	;;
rows-b)
	step rows-b 420 $mb run suites/nam56r.toml --backend cuda \
		--rows residual_rmsnorm,residual_rmsnorm_bwd,relu2,swiglu -o "$out/rows-b.json"
	python3 tests/gpu/rows_summary.py "$out/rows-b.json" | tee "$out/rows-b.txt"
	;;
sass)
	# per fused kernel: 128-bit global loads and stores in its SASS
	cuobjdump --dump-sass .gpu/bin/megabench 2>/dev/null | awk '
		/Function :/ { name = $3 }
		/LDG\.E\.128/ { ld[name]++ }
		/STG\.E\.128/ { st[name]++ }
		END { for (n in ld) if (n ~ /fused/) printf "%-70s LDG.128 %3d STG.128 %3d\n", substr(n, 1, 70), ld[n], st[n] }' \
		| sort > "$out/sass.txt"
	cat "$out/sass.txt"
	;;
*)
	echo "unknown phase $phase" >&2
	;;
esac
done

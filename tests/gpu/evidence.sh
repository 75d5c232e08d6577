#!/bin/bash
# The GPU measurements behind reports/h200/, run on a GPU host from a copy
# of this tree and bundles made here (tests/gpu/bundle.sh):
#
#   meson setup build && meson compile -C build
#   tests/gpu/bundle.sh .gpu build/megabench build/tests/megabench-test build/tests/test_cuda_backend
#   # on the host, from the repository root:
#   tests/gpu/evidence.sh PHASE...
#
# Phases:
#   checks    the GPU unit test (device fill against the host twin, every
#             variant and mode) and the broken test rows through the CLI.
#   driver    suites/nam56r.toml in bf16 with a bundle of an older revision
#             (OLD_BUNDLE, default .gpu-old) and with this one, back to back;
#             then every dtype with this one; the gate of the old receipt
#             against the new with statistics on every row; and the wall
#             time, goodput and medians side by side (compare_runs.py).
#   repeat    suites/nam56r.toml in bf16 with --repetitions 3 (between-run
#             noise); run it in two device sessions and gate one against the
#             other for an A/A across machines.
#   planted   relu2 in bf16, --repetitions 3, with this binary twice and with
#             each bin/megabench-plant* (relu2's fused kernel slowed on
#             purpose), each gated against the first run: by the default
#             gate (a plant's embedded relu2 source differs from this
#             binary's, so its rows get the statistics; the second run of
#             this binary is identical code) and with --always-test.
#   full      suites/nam56r.toml, every dtype, one pass (per-launch fractions);
#             full-summary.txt: wall time, goodput and badput, walls by row
#             and lane, cases wrong or not converged (issue 23's targets).
#   accuracy  rope_qk fused at the largest nam56r shape and the copy probe,
#             against ncu and CUDA events.
#   memcheck, racecheck, initcheck
#             compute-sanitizer's tool of that name over every variant at
#             smoke shapes (tests/gpu/memcheck.toml); SANITIZER_LIMIT_S
#             bounds each (default 300 s).
#   lanes     suites/nam56r.toml's lanes (nam56r and dense, every row of
#             their patterns, forward and backward, every alternative, eager
#             and graph) after those rows' cases in bf16, then the verdicts
#             and the lanes' targets (lanes_targets.py); LANES_TAG names the
#             receipt (a, b), LANES_ROWS the cases run first, LANES_LIMIT_S
#             bounds the run (default 420 s).
#   heavy     the MoE (ReLU^2 and SwiGLU), cross-entropy, state-space, recurrent and Sinkhorn rows
#             of suites/nam56r.toml in bf16 (ceilings measured in the same
#             run), their verdicts and targets (heavy_targets.py);
#             HEAVY_LIMIT_S bounds the run (default 540 s), HEAVY_ROWS
#             narrows the rows, HEAVY_DTYPES widens the dtypes (bf16,fp16).
#   heavy-ncu ncu's speed of light, occupancy, launch statistics, compute
#             workload and warp states of each heavy row's fused kernel at
#             its largest shape (two launches), with the instructions
#             executed in all and on the XU (MUFU) pipe, the pipes' use
#             and the warp stall reasons per issue; HEAVY_ROWS narrows the rows here too, NCU_ROWS further;
#             the MoE rows' grouped GEMM kernels' rates against the heavy
#             phase's GEMM ceiling (moe_gemm_rate.py; run heavy first in
#             the same call); for linear_cross_entropy, whose fused variants
#             are cuBLAS calls, token_chunked's first six GEMMs (two chunks:
#             logits, dh, dW, the second dW adding into the main grad).
#   heavy-source
#             ncu's source counters of each heavy row's fused kernel (one
#             launch at its largest shape, bf16): every SASS instruction's
#             executed count and warp-stall samples by reason, as CSV
#             (source-ROW.csv.gz), and sass_profile.py's summary of it
#             (source-ROW.txt: the instruction mix, the instructions where
#             warps wait most and why); HEAVY_ROWS narrows the rows.
#   moe-smoke the MoE rows at smoke shapes (bf16, fp16): every variant with
#             the grouped GEMM the device picks (the wgmma kernel on an
#             H100 or H200), the fused variant again on the mma.sync
#             kernel (MEGABENCH_MOE_GEMM=mma), the kernel each case ran;
#             then compute-sanitizer memcheck and racecheck over the fused
#             variant (hot mode).
#   shard     (two or more GPUs) the whole of suites/nam56r.toml (every row,
#             dtype and lane; SHARD_ARGS adds selection options, e.g.
#             "--dtypes bf16 --set lanes=[]") on one GPU (or SHARD_ONE, a
#             receipt of an earlier call), then on all of them (--gpus all)
#             with the costs the one-GPU receipt measured (--costs: each
#             case's wall_ns; SHARD_COSTS names other receipts, e.g. the
#             last sharded run's), validate and diff the two case by case, and
#             shard_balance.py: both wall times, their ratio, and per GPU the
#             deal's prediction against the worker's wall time, and how busy
#             the host's cores were in each run (host_cpu.py); then, unless
#             SHARD_KILL=0, a sharded run of the bf16 cases (no lanes;
#             SHARD_KILL_ARGS replaces that selection) with the same costs
#             and gpu1's worker killed (kill -9) after its first case.
#             SHARD_LIMIT_S bounds each run (default 540 s).
#   alltoall  (two or more GPUs) megabench alltoall at T 4096 and 16384 with
#             --check (every row checked), with the bundle of an older
#             revision (OLD_BUNDLE, when there) and this one, back to back,
#             the cases side by side and diffed (--force: the old receipts
#             record no topology); timed twice and the two receipts diffed;
#             then a sweep (-b 1K -e 32K -f 2) and its table.
#   smoke     every row of suites/smoke.toml on the GPU (ROWS narrows the
#             rows, here and in the sanitizer phases).
#   review    four smoke rows in bf16, hot, --repetitions 2 into a .json.gz:
#             the run table's speedups, spread and error over tolerance on a
#             GPU, validate of the gzipped receipt and of the verdict JSON.
#   sass      16-byte load and store counts of every fused kernel, and
#             the MUFU instructions of each by kind.
# Everything lands under $OUT (default ./gpu-out). Receipts carry the
# commit and source ids each binary was built from (the build embeds them);
# an OLD_BUNDLE built before that reads none from this tree, and says so
# ("no git provenance").
set -u
out=${OUT:-gpu-out}
bundle=${BUNDLE:-.gpu}
old_bundle=${OLD_BUNDLE:-.gpu-old}
mkdir -p "$out"
# shellcheck disable=SC1091
source "$bundle/env.sh"
mb=$bundle/bin/megabench
here=$(pwd)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,ecc.mode.current \
	--format=csv >"$out/nvidia-smi.csv" 2>&1
cat "$out/nvidia-smi.csv"

# The timing of a run under a profiler (ncu): no lanes, and as few timed
# launches as the harness allows (no warm-up, one sample, no time floor).
under_profiler=(--set 'lanes=[]' --set timing.min_samples=1 --set timing.min_time_s=0 --set timing.warmup=0)

# listed LIST ROW: LIST (comma-separated, e.g. HEAVY_ROWS) is empty or names ROW
listed() {
	[ -z "$1" ] || [[ ",$1," == *",$2,"* ]]
}

step() { # step NAME LIMIT_S command...
	local name=$1 limit=$2
	shift 2
	local t0=$SECONDS
	timeout "$limit" "$@" >"$out/$name.log" 2>&1
	local rc=$?
	echo "== $name: exit $rc in $((SECONDS - t0)) s"
	tail -n 12 "$out/$name.log"
}

for phase in "${@:-checks}"; do
	case $phase in
	checks)
		MB_GPU_TEST_OUT=$out/test_cuda_backend.json step test_cuda_backend 200 "$bundle/bin/test_cuda_backend"
		step faults 120 "$bundle/bin/megabench-test" run tests/e2e/faults.toml --backend cuda -o "$out/faults.json"
		python3 -c "import json,sys; r=json.load(open(sys.argv[1])); [print(c['row'], c['variant'], c['status'], (c['error'] or '')[:90]) for c in r['cases']]" "$out/faults.json"
		;;
	driver)
		(
			# shellcheck disable=SC1091
			source "$old_bundle/env.sh"
			step old-bf16 420 "$old_bundle/bin/megabench" run suites/nam56r.toml --backend cuda --dtypes bf16 \
				-o "$out/old-bf16.json"
		)
		step new-bf16 240 "$mb" run suites/nam56r.toml --backend cuda --dtypes bf16 -o "$out/new-bf16.json"
		step new-all 300 "$mb" run suites/nam56r.toml --backend cuda -o "$out/new-all.json"
		step gate 120 "$mb" gate --always-test --baseline "$out/old-bf16.json" "$out/new-bf16.json" \
			--format markdown --junit "$out/gate.xml"
		python3 tests/gpu/compare_runs.py "$out/old-bf16.json" "$out/new-bf16.json" "$out/new-all.json" |
			tee "$out/driver.txt"
		;;
	repeat)
		step rep3-bf16 300 "$mb" run suites/nam56r.toml --backend cuda --dtypes bf16 --repetitions 3 \
			-o "$out/rep3-bf16.json"
		;;
	planted)
		for who in base again "$bundle"/bin/megabench-plant*; do
			name=$(basename "$who")
			bin=$mb
			[ -x "$who" ] && bin=$who
			step "relu2-$name" 120 "$bin" run suites/nam56r.toml --backend cuda --rows relu2 --dtypes bf16 \
				--repetitions 3 -o "$out/relu2-$name.json"
			if [ "$name" != base ]; then
				for how in default always-test; do
					opts=()
					[ "$how" = always-test ] && opts=(--always-test)
					"$mb" gate "${opts[@]}" --baseline "$out/relu2-base.json" "$out/relu2-$name.json" \
						--format markdown >"$out/gate-relu2-$name-$how.md" 2>&1
					echo "== gate ($how) relu2 base -> $name: exit $?"
					grep -E "^\*\*|relu2/fused" "$out/gate-relu2-$name-$how.md" | head -n 4
				done
			fi
		done
		;;
	full)
		step full 400 "$mb" run suites/nam56r.toml --backend cuda -o "$out/full.json"
		# issue 23's targets: wall time, goodput and its badput, walls by
		# row and lane, and whether every case is correct and converged
		python3 - "$out/full.json" <<'PY' | tee "$out/full-summary.txt"
import collections, json, sys
r = json.load(open(sys.argv[1]))
g = r["goodput"]
print("wall %.1f s, goodput %.1f s (%.3f); status %s" % (g["wall_ns"] / 1e9, g["goodput_ns"] / 1e9,
      g["goodput_fraction"], r["status"]))
print("badput: " + ", ".join("%s %.1f s" % (k, v / 1e9) for k, v in sorted(g["badput_ns"].items(), key=lambda kv: -kv[1])))
print("overlapped host work %.1f s" % (g["overlapped_ns"]["host_work"] / 1e9))
rows = collections.defaultdict(lambda: [0, 0.0, 0.0])
for c in r["cases"]:
    w = rows[c["row"]]
    w[0] += 1
    w[1] += c.get("wall_ns", 0) / 1e9
    w[2] = max(w[2], c.get("wall_ns", 0) / 1e9)
for k, w in sorted(rows.items(), key=lambda kv: -kv[1][1]):
    print("  %-22s %3d cases %6.1f s (longest case %.1f s)" % (k, w[0], w[1], w[2]))
for lane in r.get("lanes", []):
    print("  lane %-17s %6.1f s" % (lane["name"], lane["wall_ns"] / 1e9))
bad = [c["id"] for c in r["cases"] if c["status"] != "ok" or not c["correctness"]["passed"]]
slow = [c["id"] for c in r["cases"] if c["status"] == "ok" and not c["timing"]["converged"]]
print("%d cases, %d not ok or wrong, %d not converged; worst rel_noise %.4f" % (len(r["cases"]), len(bad), len(slow),
      max((c["timing"]["rel_noise"] for c in r["cases"] if c["status"] == "ok"), default=0)))
for i in (bad + slow)[:10]:
    print("  " + i)
PY
		;;
	accuracy)
		step accuracy 90 "$mb" run tests/gpu/accuracy.toml --backend cuda -o "$out/accuracy.json"
		step ncu 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$out/ncu.csv" \
			-k "regex:mb_ceiling_copy_kernel|rope_qk_fused" -c 120 \
			"$mb" run tests/gpu/accuracy.toml --backend cuda --min-time 0 -o "$out/accuracy-under-ncu.json"
		python3 tests/gpu/accuracy.py "$out/accuracy.json" "$out/ncu.csv" | tee "$out/accuracy.txt"
		;;
	memcheck | racecheck | initcheck)
		MEGABENCH_SKIP_CEILINGS=1 step "$phase" "${SANITIZER_LIMIT_S:-300}" compute-sanitizer --tool "$phase" --target-processes all \
			--error-exitcode 9 "$mb" run tests/gpu/memcheck.toml --backend cuda ${ROWS:+--rows "$ROWS"} -o "$out/$phase.json"
		grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/$phase.log" | sort | uniq -c
		;;
	lanes)
		# the nam56r and dense lanes after the cases of the rows they hold
		# (the verdicts weigh a row's lane deltas only beside its cases); run
		# it on two separately started machines (LANES_TAG a, b) to see the
		# deltas repeat
		tag=${LANES_TAG:-a}
		rows=${LANES_ROWS:-residual_rmsnorm,residual_rmsnorm_bwd,rope_qk,rope_qk_bwd,mla_partial_rope,moe_ffn,moe_ffn_swiglu,ssm_scan,recurrent_scan,mhc_sinkhorn,relu2,swiglu}
		step "lanes-$tag" "${LANES_LIMIT_S:-420}" "$mb" run suites/nam56r.toml --backend cuda --rows "$rows" \
			--dtypes bf16 -o "$out/lanes-$tag.json"
		"$mb" verdict "$out/lanes-$tag.json" >"$out/lanes-$tag-verdict.txt" 2>&1
		cat "$out/lanes-$tag-verdict.txt"
		python3 tests/gpu/lanes_targets.py "$out/lanes-$tag.json" | tee "$out/lanes-$tag-targets.txt"
		;;
	heavy)
		rows=${HEAVY_ROWS:-moe_ffn,moe_ffn_swiglu,linear_cross_entropy,ssm_scan,recurrent_scan,mhc_sinkhorn}
		step heavy "${HEAVY_LIMIT_S:-540}" "$mb" run suites/nam56r.toml --backend cuda --rows "$rows" \
			--dtypes "${HEAVY_DTYPES:-bf16}" --set 'lanes=[]' -o "$out/heavy.json"
		"$mb" verdict "$out/heavy.json" >"$out/heavy-verdict.txt" 2>&1
		python3 tests/gpu/heavy_targets.py "$out/heavy.json" | tee "$out/heavy-targets.txt"
		;;
	heavy-ncu)
		ncu_metrics=smsp__inst_executed.sum,sm__inst_executed_pipe_xu.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
		ncu_metrics+=,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active
		ncu_metrics+=,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active
		# where the warp cycles between issues go (WarpStateStats' own metrics, printed)
		for r in barrier long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait not_selected lg_throttle; do
			ncu_metrics+=,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
		done
		for k in moe_ffn:moe_ffn_grouped_gemm moe_ffn_swiglu:moe_ffn_grouped_gemm ssm_scan:ssm_scan_fused \
			recurrent_scan:recurrent_scan_fused mhc_sinkhorn:mhc_sinkhorn_fused; do
			{ listed "${HEAVY_ROWS:-}" "${k%%:*}" && listed "${NCU_ROWS:-}" "${k%%:*}"; } || continue
			name=ncu-${k%%:*}
			MEGABENCH_SKIP_CEILINGS=1 step "$name" 120 ncu --clock-control none --section SpeedOfLight \
				--section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
				--section ComputeWorkloadAnalysis --section WarpStateStats --metrics "$ncu_metrics" \
				-k "regex:${k#*:}" -c 2 --log-file "$out/$name.txt" "$mb" run suites/nam56r.toml --backend cuda \
				--rows "${k%%:*}" --variants fused --filter '[TL]=16384' \
				"${under_profiler[@]}" -o "$out/$name.json"
			pat="^  void|Duration|Throughput|Registers Per|Achieved Occupancy|inst_executed|issue_active|Stall"
			pat+="|Warp Cycles|Spilling Requests|L1/TEX Hit|Shared Memory Configuration"
			grep -E "$pat" "$out/$name.txt" | tail -n 40
		done
		k=linear_cross_entropy
		if listed "${HEAVY_ROWS:-}" "$k" && listed "${NCU_ROWS:-}" "$k"; then
			MEGABENCH_SKIP_CEILINGS=1 step "ncu-$k" 240 ncu --clock-control none --section SpeedOfLight \
				--section LaunchStats --section MemoryWorkloadAnalysis -k "regex:gemm|nvjet" -c 6 \
				--log-file "$out/ncu-$k.txt" "$mb" run suites/nam56r.toml --backend cuda --rows "$k" \
				--variants token_chunked --filter 'T=16384,H=4096,V=128256' \
				"${under_profiler[@]}" -o "$out/ncu-$k.json"
			grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Memory Throughput" \
				"$out/ncu-$k.txt" | tail -n 30
		fi
		moe_logs=()
		for f in "$out"/ncu-moe_ffn.txt "$out"/ncu-moe_ffn_swiglu.txt; do
			[ -f "$f" ] && moe_logs+=("$f")
		done
		if [ ${#moe_logs[@]} -gt 0 ] && [ -f "$out/heavy.json" ]; then
			python3 tests/gpu/moe_gemm_rate.py "$out/heavy.json" "${moe_logs[@]}" | tee "$out/moe-gemm-rate.txt"
		fi
		;;
	heavy-source)
		for k in moe_ffn:moe_ffn_grouped_gemm:T=16384 ssm_scan:ssm_scan_fused:L=16384 \
			recurrent_scan:recurrent_scan_fused:L=16384 mhc_sinkhorn:mhc_sinkhorn_fused:T=16384; do
			row=${k%%:*} rest=${k#*:}
			kernel=${rest%%:*} filter=${rest#*:}
			listed "${HEAVY_ROWS:-}" "$row" || continue
			MEGABENCH_SKIP_CEILINGS=1 step "source-$row" 150 ncu --clock-control none --section SourceCounters \
				--section WarpStateStats -k "regex:$kernel" -c 1 -f -o "$out/source-$row" "$mb" run suites/nam56r.toml \
				--backend cuda --rows "$row" --variants fused --dtypes bf16 --filter "$filter" \
				"${under_profiler[@]}" -o "$out/source-$row.json"
			if ncu -i "$out/source-$row.ncu-rep" --page source --csv --print-source sass >"$out/source-$row.csv"; then
				gzip -f "$out/source-$row.csv"
				python3 tests/gpu/sass_profile.py "$out/source-$row.csv.gz" >"$out/source-$row.txt"
				sed -n '1,4p;/where warps wait/,$p' "$out/source-$row.txt"
			fi
		done
		;;
	moe-smoke)
		rows=moe_ffn,moe_ffn_swiglu
		MEGABENCH_SKIP_CEILINGS=1 step moe-smoke 200 "$mb" run suites/smoke.toml --backend cuda --rows "$rows" \
			-o "$out/moe-smoke.json"
		MEGABENCH_SKIP_CEILINGS=1 step moe-smoke-mma 200 env MEGABENCH_MOE_GEMM=mma "$mb" run suites/smoke.toml \
			--backend cuda --rows "$rows" \
			--variants fused -o "$out/moe-smoke-mma.json"
		for r in moe-smoke moe-smoke-mma; do
			python3 -c "import json,sys; r=json.load(open(sys.argv[1])); [print(sys.argv[2], c['status'], (c.get('correctness') or {}).get('passed'), c['id'], ' '.join(k['name'].split('(')[0] for k in c.get('kernels') or [] if 'grouped_gemm' in k['name'])) for c in r['cases']]" "$out/$r.json" "$r"
		done
		if ! grep -q ' 0 failed' "$out/moe-smoke.log"; then
			echo "== moe-smoke: a case did not pass; the sanitizers are skipped"
			continue
		fi
		for tool in memcheck racecheck; do
			MEGABENCH_SKIP_CEILINGS=1 step "moe-$tool" "${SANITIZER_LIMIT_S:-300}" compute-sanitizer --tool "$tool" \
				--target-processes all --error-exitcode 9 "$mb" run suites/smoke.toml --backend cuda --rows "$rows" \
				--variants fused --modes hot -o "$out/moe-$tool.json"
			grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/moe-$tool.log" | sort | uniq -c
		done
		;;
	shard)
		# shellcheck disable=SC2206
		common=(suites/nam56r.toml --backend cuda ${SHARD_ARGS:-})
		limit=${SHARD_LIMIT_S:-540}
		one=${SHARD_ONE:-$out/shard-1.json}
		if [ -z "${SHARD_ONE:-}" ]; then
			python3 tests/gpu/host_cpu.py sample "$out/cpu-shard-1.txt" &
			sampler=$!
			step shard-1 "$limit" "$mb" run "${common[@]}" --gpus 1 -o "$one"
			kill "$sampler"
		fi
		costs=${SHARD_COSTS:-$one}
		"$mb" run "${common[@]}" --gpus all --dry-run --costs "$costs" 2>&1 | grep -v '^[a-z_0-9]*/' >"$out/shard-plan.txt"
		cat "$out/shard-plan.txt"
		python3 tests/gpu/host_cpu.py sample "$out/cpu-shard-all.txt" &
		sampler=$!
		step shard-all "$limit" "$mb" run "${common[@]}" --gpus all --costs "$costs" -o "$out/shard-all.json"
		kill "$sampler"
		python3 tests/gpu/host_cpu.py report "$out"/cpu-shard-*.txt | tee "$out/host-cpu.txt"
		"$mb" validate "$out/shard-all.json"
		"$mb" diff "$one" "$out/shard-all.json" >"$out/shard-diff.txt" 2>&1
		echo "== diff one GPU -> all: exit $?"
		head -n 5 "$out/shard-diff.txt"
		python3 tests/gpu/shard_balance.py "$one" "$out/shard-all.json" | tee "$out/shard-balance.txt"
		[ "${SHARD_KILL:-1}" = 0 ] && continue
		# a worker killed mid-run: its unfinished cases crashed, the rest kept
		# shellcheck disable=SC2086
		"$mb" run suites/nam56r.toml --backend cuda ${SHARD_KILL_ARGS:---dtypes bf16 --set lanes=[]} --gpus all \
			--costs "$one" -o "$out/shard-kill.json" >"$out/shard-kill.out" 2>"$out/shard-kill.err" &
		run_pid=$!
		victim=
		for _ in $(seq 600); do
			victim=$(sed -n 's/.*gpu1 .*worker pid \([0-9]*\).*/\1/p' "$out/shard-kill.err" | head -n 1)
			[ -n "$victim" ] && grep -q '\] ok .* gpu1 ' "$out/shard-kill.err" && break
			sleep 0.2
		done
		[ -n "$victim" ] && kill -9 "$victim" && echo "== killed gpu1's worker $victim"
		wait "$run_pid"
		echo "== killed run: exit $?"
		"$mb" validate "$out/shard-kill.json"
		python3 -c "import json,sys,collections; r=json.load(open(sys.argv[1])); print(collections.Counter((c.get('gpu'), c['status']) for c in r['cases']))" "$out/shard-kill.json"
		;;
	alltoall)
		a2a=(alltoall --gpus all -T 4096,16384)
		if [ -x "$old_bundle/bin/megabench" ]; then
			(
				# shellcheck disable=SC1091
				source "$old_bundle/env.sh"
				step alltoall-old-check 240 "$old_bundle/bin/megabench" "${a2a[@]}" --check --samples 20 \
					-o "$out/alltoall-old-check.json"
			)
		fi
		step alltoall-check 240 "$mb" "${a2a[@]}" --check --samples 20 -o "$out/alltoall-check.json"
		step alltoall 240 "$mb" "${a2a[@]}" --samples 100 -o "$out/alltoall.json"
		step alltoall-again 240 "$mb" "${a2a[@]}" --samples 100 -o "$out/alltoall-again.json"
		"$mb" validate "$out"/alltoall*.json
		"$mb" diff "$out/alltoall.json" "$out/alltoall-again.json" >"$out/alltoall-diff.txt" 2>&1
		echo "== diff alltoall -> alltoall-again: exit $?"
		head -n 12 "$out/alltoall-diff.txt"
		python3 - "$out"/alltoall-old-check.json "$out/alltoall-check.json" <<'PY'
import json, os, sys
runs = [json.load(open(p)) for p in sys.argv[1:] if os.path.exists(p)]
print("%-72s" % "case" + "".join("  %-36s" % os.path.basename(p) for p in sys.argv[1:] if os.path.exists(p)))
for c in runs[-1]["cases"]:
    cells = []
    for r in runs:
        d = next((x for x in r["cases"] if x["id"] == c["id"]), None)
        t, coll = (d or {}).get("timing") or {}, (d or {}).get("collective") or {}
        cells.append("%s %s %7.3f ms %6.1f GB/s" % ((d or {}).get("status", "-"), "exact" if d and
            d["correctness"] and d["correctness"]["passed"] else "WRONG", t.get("median_ns", 0) / 1e6,
            coll.get("busbw_gbps") or 0))
    print("%-72s" % c["id"] + "".join("  %-36s" % x for x in cells))
PY
		if [ -f "$out/alltoall-old-check.json" ]; then
			# the old receipts have no topology: diff refuses them without --force
			"$mb" diff --force "$out/alltoall-old-check.json" "$out/alltoall-check.json" >"$out/alltoall-old-diff.txt" 2>&1
			echo "== diff --force old -> new (checked runs): exit $?"
			head -n 12 "$out/alltoall-old-diff.txt"
		fi
		step alltoall-sweep 240 "$mb" alltoall --gpus all -b 1K -e 32K -f 2 --samples 50 -o "$out/alltoall-sweep.json"
		grep -E "^#|^ " "$out/alltoall-sweep.log"
		;;
	smoke)
		step smoke-gpu 200 "$mb" run suites/smoke.toml --backend cuda ${ROWS:+--rows "$ROWS"} -o "$out/smoke-gpu.json"
		grep -E "passed|FAIL|crashed|timeout|skipped" "$out/smoke-gpu.log" | tail -n 15
		;;
	review)
		# issue 27 on a GPU: the run table (each fused case's speedup
		# against its best alternative, the spread of two interleaved
		# passes, the error over tolerance), a gzipped receipt, and the
		# verdict JSON against its schema
		step review 240 "$mb" run suites/smoke.toml --backend cuda --rows relu2,swiglu,rope_qk,row_gather \
			--dtypes bf16 --modes hot --repetitions 2 -o "$out/review.json.gz"
		grep -E "^row |vs (fallback|vendor|cublas)|shuffled" "$out/review.log" | head -n 12
		"$mb" validate "$out/review.json.gz"
		"$mb" verdict --format json "$out/review.json.gz" >"$out/review-verdict.json" && "$mb" validate "$out/review-verdict.json"
		python3 -c "import gzip,json,sys; r=json.load(gzip.open(sys.argv[1])); c=r['cases']; \
print(len(c), 'cases;', sum('error_over_tolerance' in x['correctness'] for x in c), 'with error_over_tolerance;', \
'largest', max(x['correctness']['error_over_tolerance'] or 0 for x in c))" "$out/review.json.gz"
		;;
	sass)
		# per fused kernel: 128-bit global loads and stores in its SASS
		cuobjdump --dump-sass "$mb" 2>/dev/null | awk '
			/Function :/ { name = $3 }
			/LDG\.E.*\.128/ { ld[name]++ }
			/STG\.E.*\.128/ { st[name]++ }
			/MUFU\./ { match($0, /MUFU\.[A-Z0-9]+/); mu[name] = mu[name] " " substr($0, RSTART + 5, RLENGTH - 5) }
			END { for (n in ld) if (n ~ /fused/) printf "%-70s LDG.128 %3d STG.128 %3d MUFU%s\n", substr(n, 1, 70), ld[n], st[n], mufu(mu[n]) }
			function mufu(list,   k, i, c, kinds, out) {
				k = split(list, kinds, " "); out = ""
				for (i = 1; i <= k; i++) c[kinds[i]]++
				for (i in c) out = out " " i ":" c[i]
				return out == "" ? " none" : out
			}' |
			sort >"$out/sass.txt"
		cat "$out/sass.txt"
		;;
	*)
		echo "unknown phase $phase" >&2
		;;
	esac
done
cd "$here" || exit 1

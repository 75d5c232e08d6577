#!/usr/bin/env python3
"""Write the verdict golden scenarios: one folder each, with receipt.json (a
small receipt made here on the frame of ../gate/regression/base.json) and
expected_exit; expected.md is `megabench verdict --format markdown
receipt.json`, written by run_verdict.sh --bless and reviewed by hand.

Each scenario pins one rule of src/receipts/verdict.h, so that breaking the
rule changes its expected.md:

  vendor_wins_one_shape  a vendor library beats the fused kernel at the small
                         shape, the fused kernel beats every alternative at
                         the large one: conditional on the shape, naming the
                         vendor variant (the fallback alone would say keep)
  memory_trade           a row that trades memory: slower than its fallback,
                         but 98% less scratch memory: conditional, saying
                         what it saves and costs (time alone would say drop)
  conditional_by_shape   wins in bf16 at T >= 16384 only: a two-term selector
  inconclusive_lanes     wins every isolated pair, the lane step cannot tell:
                         keep on isolated evidence, lanes inconclusive
  status_disagreement    statuses that the verdicts do and do not support
  one_pair_lost          eleven pairs win, one fp32 pair is 3% slower:
                         conditional on the dtype, not drop
  one_pair_unconverged   every pair wins but one that did not converge:
                         conditional, not ambiguous
  hot_mode_win           wins in hot mode only: saved time taken in hot mode

Usage: gen.py [OUTDIR]   (default: the folder of this script).
Seeded: the same script always writes the same bytes.
"""
import copy
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FRAME = os.path.join(HERE, "..", "gate", "regression", "base.json")
SAMPLES = 30
NOISE = 0.002
MIB = 1 << 20


def timing(rng, median_ns, converged=True, noise=NOISE):
    samples = [round(median_ns * (1 + rng.gauss(0, noise)), 1) for _ in range(SAMPLES)]
    s = sorted(samples)
    med = (s[SAMPLES // 2 - 1] + s[SAMPLES // 2]) / 2
    mean = sum(samples) / SAMPLES
    sd = (sum((x - mean) ** 2 for x in samples) / (SAMPLES - 1)) ** 0.5
    return {"source": "cupti", "samples_ns": samples, "excluded": [], "median_ns": med, "mean_ns": mean,
            "stddev_ns": sd, "min_ns": s[0], "max_ns": s[-1], "p10_ns": s[SAMPLES // 10],
            "p90_ns": s[SAMPLES * 9 // 10], "rel_noise": noise if converged else 0.2, "converged": converged,
            "warmup_calls": 10, "sampling_ns": round(mean * SAMPLES), "span_median_ns": med,
            "launches_per_call": 1}


def case(rng, row, block, variant, kind, dtype, mode, family, shape, median_ns, scratch=None, bytes_=None,
         converged=True, weight=1.0):
    sid = ",".join("%s=%d" % kv for kv in shape.items())
    c = {"id": "/".join([row, variant, dtype, mode, family, sid]), "row": row, "block": block,
         "variant": variant, "variant_kind": kind, "backend": "cuda", "dtype": dtype, "mode": mode,
         "family": family, "shape": dict(shape), "weight": weight,
         "weight_source": "suite" if weight != 1.0 else "default", "status": "ok", "error": None,
         "correctness": {"reference": "fp32 C reference",
                         "tolerance": {"abs": 0.01, "rel": 0.02, "rationale": "one rounding of the output"},
                         "max_abs": 0.001, "max_rel": 0.002, "rel_l2": 0.0005, "over_tolerance": 0,
                         "nan_count": 0, "inf_count": 0, "norm_ratio": 1.0, "rows_checked": 64,
                         "rows_total": 4096, "row_sample_seed": 7, "checks": ["first", "last"], "passed": True},
         "timing": timing(rng, median_ns, converged),
         "throughput": {"bytes": bytes_ or 64 * MIB, "flops": 0, "gbps": 1.0, "tflops": None,
                        "ceiling": "copy", "fraction_of_ceiling": 0.5},
         "memory": {"io_bytes": 64 * MIB, "scratch_bytes": scratch, "driver_scratch_bytes": scratch},
         "findings": []}
    return c


def receipt(frame, cases, catalog, lanes=None):
    r = copy.deepcopy(frame)
    r["schema_version"] = 2
    r["cases"] = cases
    r["catalog"] = catalog
    r["summary"]["cases"] = len(cases)
    r["summary"]["ok"] = len(cases)
    for k in ("failed", "skipped", "crashed", "timeout", "oom"):
        r["summary"][k] = 0
    r["summary"]["converged"] = sum(1 for c in cases if c["timing"]["converged"])
    r["summary"]["findings"] = 0
    if lanes:
        r["lanes"] = lanes
    return r


def lane_run(rng, config, ns, rounds=3, steps=20):
    all_steps, medians = [], []
    for _ in range(rounds):
        rnd = [round(ns * (1 + rng.gauss(0, NOISE))) for _ in range(steps)]
        all_steps += rnd
        medians.append(sorted(rnd)[steps // 2])
    med = sorted(all_steps)[len(all_steps) // 2]
    busy = [round(s * 0.9) for s in all_steps]
    return {"config": config, "mode": "graph", "step_ns": all_steps, "busy_ns": busy, "round_medians_ns": medians,
            "median_step_ns": med, "median_busy_ns": round(med * 0.9), "goodput": 0.9,
            "launch_gap_ns": med - round(med * 0.9), "memcpy_ns": 0, "memset_ns": 0, "median_host_ns": 1000,
            "first_step_ns": 1000}


def lane(rng, row, fraction):
    fused = lane_run(rng, "fused", 1_000_000)
    alt = lane_run(rng, row + ":fallback", 1_000_000 * (1 + fraction))
    delta = alt["median_step_ns"] - fused["median_step_ns"]
    return {"name": "step", "pattern": "A", "shape": {"tokens": 4096, "hidden": 4096}, "steps": 20, "warmup": 3,
            "rounds": 3,
            "modes": ["graph"], "ops": [{"block": 0, "label": row, "kind": "row", "row": row}],
            "rows": [{"row": row, "calls_per_step": 1}], "notes": [], "runs": [fused, alt],
            "deltas": [{"row": row, "config": row + ":fallback", "mode": "graph", "variant": "fallback",
                        "fused_step_ns": fused["median_step_ns"], "delta_ns": delta,
                        "delta_fraction": delta / fused["median_step_ns"], "fallback_is": "SAME"}]}


def experimental(*rows, trades="time"):
    return {r: {"status": "experimental", "trades": trades} for r in rows}


def vendor_wins_one_shape(rng):
    cases = []
    # (T, fused, standard, cublas_grouped) ms and scratch MiB at H200 run d's proportions
    for t, fu, st, cb in ((4096, 1.346, 1.396, 1.185), (16384, 3.90, 4.985, 4.158)):
        shape = {"T": t, "H": 2048, "E": 64}
        for variant, kind, ms, scratch in (("fused", "fused", fu, 162), ("standard", "fallback", st, 893),
                                           ("cublas_grouped", "vendor", cb, 290)):
            cases.append(case(rng, "moe", "E", variant, kind, "bf16", "cold", "moe", shape, ms * 1e6,
                              scratch * MIB * t // 4096))
    return receipt(FRAME_R, cases, experimental("moe"))


def memory_trade(rng):
    cases = []
    for t, fu, ma, fs, ms in ((8192, 26.8, 19.5, 80, 2036), (16384, 54.4, 39.2, 96, 4040)):
        shape = {"T": t, "H": 2048, "V": 128256}
        cases.append(case(rng, "lce", "X", "chunked", "fused", "bf16", "cold", "lm_head", shape, fu * 1e6, fs * MIB))
        cases.append(case(rng, "lce", "X", "materialized", "fallback", "bf16", "cold", "lm_head", shape, ma * 1e6,
                          ms * MIB))
    return receipt(FRAME_R, cases, experimental("lce", trades="memory"))


def conditional_by_shape(rng):
    cases = []
    for dtype in ("bf16", "fp32"):
        for t in (4096, 16384, 65536):
            fb = 10_000.0 * t / 4096
            wins = dtype == "bf16" and t >= 16384
            shape = {"T": t, "F": 1408}
            cases.append(case(rng, "act", "E", "fused", "fused", dtype, "cold", "expert", shape, fb * (0.6 if wins else 1.0)))
            cases.append(case(rng, "act", "E", "fallback", "fallback", dtype, "cold", "expert", shape, fb))
    return receipt(FRAME_R, cases, experimental("act"))


def two_shapes(rng, row, block, fused_ratio=0.6):
    cases = []
    for t in (4096, 16384):
        shape = {"T": t, "H": 4096}
        fb = 20_000.0 * t / 4096
        cases.append(case(rng, row, block, "fused", "fused", "bf16", "cold", "dense", shape, fb * fused_ratio))
        cases.append(case(rng, row, block, "fallback", "fallback", "bf16", "cold", "dense", shape, fb))
    return cases


def inconclusive_lanes(rng):
    return receipt(FRAME_R, two_shapes(rng, "norm", "X"), experimental("norm"), [lane(rng, "norm", 0.0)])


def status_disagreement(rng):
    cases = two_shapes(rng, "norm", "X") + two_shapes(rng, "gather", "A", 1.0) + two_shapes(rng, "old", "A", 1.0) \
        + two_shapes(rng, "rope", "A")
    catalog = {"norm": {"status": "keep", "trades": "time"}, "gather": {"status": "experimental", "trades": "time"},
               "old": {"status": "drop", "trades": "time"}, "rope": {"status": "drop", "trades": "time"}}
    return receipt(FRAME_R, cases, catalog)


def one_pair_lost(rng):
    cases = []
    for dtype in ("bf16", "fp16", "fp32"):
        for h in (2048, 4096, 8192, 16384):
            shape = {"T": 16384, "H": h}
            fb = 30_000.0 * h / 2048
            ratio = 1.03 if (dtype, h) == ("fp32", 16384) else 1 / (1.5 + h / 8192)
            cases.append(case(rng, "rmsnorm", "X", "fused", "fused", dtype, "cold", "stack", shape, fb * ratio))
            cases.append(case(rng, "rmsnorm", "X", "fallback", "fallback", dtype, "cold", "stack", shape, fb))
    return receipt(FRAME_R, cases, experimental("rmsnorm"))


def one_pair_unconverged(rng):
    cases = two_shapes(rng, "norm", "X")
    cases[0]["timing"] = timing(rng, cases[0]["timing"]["median_ns"], converged=False)
    return receipt(FRAME_R, cases, experimental("norm"))


def hot_mode_win(rng):
    cases = []
    for mode in ("cold", "hot"):
        shape = {"T": 4096, "H": 4096}
        fb = 20_000.0
        cases.append(case(rng, "norm", "X", "fused", "fused", "bf16", mode, "dense", shape,
                          fb * (0.5 if mode == "hot" else 1.0)))
        cases.append(case(rng, "norm", "X", "fallback", "fallback", "bf16", mode, "dense", shape, fb))
    return receipt(FRAME_R, cases, experimental("norm"))


SCENARIOS = [vendor_wins_one_shape, memory_trade, conditional_by_shape, inconclusive_lanes, status_disagreement,
             one_pair_lost, one_pair_unconverged, hot_mode_win]


def main():
    global FRAME_R
    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    FRAME_R = json.load(open(FRAME))
    FRAME_R.pop("lanes", None)
    for k, make in enumerate(SCENARIOS):
        d = os.path.join(out, make.__name__)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "receipt.json"), "w") as f:
            json.dump(make(random.Random(1000 + k)), f, indent=1)
            f.write("\n")
        with open(os.path.join(d, "expected_exit"), "w") as f:
            f.write("0\n")


if __name__ == "__main__":
    main()

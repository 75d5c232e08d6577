#!/usr/bin/env python3
"""Regenerate the synthetic receipts of the gate golden tests.

Each scenario folder gets base.json, head.json (valid against
schemas/receipt.schema.json; schema version 2, with binary provenance,
except where a scenario says otherwise), expected_exit (the gate exit code the scenario
is built to produce) and, for some, policy.toml and expected_diff_exit
(diff's own exit code where it differs from the rule in run_gate.sh).
noise_floor_learned/ also gets aa/ (the A/A receipts `megabench noise-floor`
learns from) and expected_exit_default (the gate without that policy). expected.md is the exact
`megabench diff --format markdown base.json head.json` output; it is written
by run_gate.sh --bless and reviewed by hand.

Usage: gen.py [OUTDIR]   (default: the folder of this script). Seeded: the
same script always writes the same bytes.
"""
import copy
import json
import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = 30
REL_NOISE = 0.005
# the standard normal's 80th percentile: above it, a call is among the slowest 20%
Z_SLOWEST_20 = 0.8416

ROWS = [
    # row, block, families -> shapes, launches (fused, fallback), kernels
    ("rmsnorm", "X", {"llama7b": {"tokens": 4096, "hidden": 4096}, "llama70b": {"tokens": 4096, "hidden": 8192}},
     (1, 3), (["rmsnorm_fused"], ["reduce_sq", "rsqrt_scale", "mul_weight"]), 40000.0),
    ("rope", "A", {"llama7b": {"tokens": 4096, "heads": 32, "head_dim": 128},
                   "mixtral": {"tokens": 8192, "heads": 32, "head_dim": 128}},
     (1, 2), (["rope_fused"], ["rope_cos_sin", "rope_apply"]), 60000.0),
]


def oid(rng):
    return "".join(rng.choice("0123456789abcdef") for _ in range(40))


def timing(rng, median, launches, factor=1.0, converged=True, samples=SAMPLES, noise=REL_NOISE, tail=None):
    """Samples around median * factor at `noise`; `tail` reshapes them:
    "slowest" makes the slowest 20% of calls 20% slower, "mixture" 30% of
    the calls 10% slower."""
    if tail is None:
        s = sorted(median * factor * math.exp(rng.gauss(0.0, noise)) for _ in range(samples))
    else:
        s = []
        for _ in range(samples):
            z = rng.gauss(0.0, 1.0)
            x = median * factor * math.exp(noise * z)
            if tail == "slowest" and z > Z_SLOWEST_20:
                x *= 1.2
            if tail == "mixture" and rng.random() < 0.3:
                x *= 1.1
            s.append(x)
        s.sort()
    raw = [round(x, 1) for x in s]
    rng.shuffle(raw)
    return stats(raw, launches, converged)


def stats(raw, launches, converged=True):
    n = len(raw)
    srt = sorted(raw)
    med = (srt[n // 2 - 1] + srt[n // 2]) / 2 if n % 2 == 0 else srt[n // 2]
    mean = sum(raw) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in raw) / (n - 1))
    mad = sorted(abs(x - med) for x in raw)
    mad = (mad[n // 2 - 1] + mad[n // 2]) / 2 if n % 2 == 0 else mad[n // 2]
    return {
        "source": "cupti", "samples_ns": raw, "excluded": [], "median_ns": med, "mean_ns": mean,
        "stddev_ns": sd, "min_ns": srt[0], "max_ns": srt[-1], "p10_ns": srt[n // 10],
        "p90_ns": srt[n * 9 // 10], "rel_noise": 1.2533 * 1.4826 * mad / math.sqrt(n) / med,
        "converged": converged, "warmup_calls": 10, "sampling_ns": int(sum(raw) * 3),
        "span_median_ns": med, "events_median_ns": med * 1.01, "launches_per_call": launches,
    }


def timing_reps(rng, median, launches, levels):
    """One pass per entry of `levels` (its level relative to median), 30
    samples each; samples_ns is their concatenation, as the runner writes."""
    passes = [timing(rng, median * level, launches) for level in levels]
    raw = [x for p in passes for x in p["samples_ns"]]
    t = stats(raw, launches)
    meds = [p["median_ns"] for p in passes]
    mean = sum(meds) / len(meds)
    t["repetitions"] = [{"samples_ns": p["samples_ns"], "excluded": [], "median_ns": p["median_ns"],
                         "rel_noise": p["rel_noise"], "converged": True} for p in passes]
    t["between_run_noise"] = math.sqrt(sum((m - mean) ** 2 for m in meds) / (len(meds) - 1)) / mean
    return t


def case(rng, row, block, variant, family, shape, launches, kernels, median):
    kind = variant
    tol = {"abs": 0.01, "rel": 0.02, "rationale": "bf16 output: 8 mantissa bits, one rounding after fp32 accumulation"}
    t = timing(rng, median, launches)
    nbytes = 2 * 2 * math.prod(shape.values())
    gbps = nbytes / t["median_ns"]
    return {
        "id": "%s/%s/bf16/hot/%s/%s" % (row, variant, family, ",".join("%s=%d" % kv for kv in shape.items())),
        "row": row, "block": block, "variant": variant, "variant_kind": kind, "backend": "cuda",
        "dtype": "bf16", "mode": "hot", "family": family, "shape": dict(shape), "weight": 2.0 if family == "llama7b" else 1.0,
        "status": "ok", "error": None,
        "correctness": {"reference": "fp32 C reference", "tolerance": tol, "max_abs": 0.0031, "max_rel": 0.0042,
                        "rel_l2": 0.0011, "over_tolerance": 0, "nan_count": 0, "inf_count": 0, "norm_ratio": 1.0001,
                        "rows_checked": 64, "rows_total": shape["tokens"], "row_sample_seed": 7,
                        "checks": ["first", "last"], "passed": True},
        "timing": t,
        "throughput": {"bytes": nbytes, "flops": 0, "gbps": gbps, "tflops": None, "ceiling": "copy",
                       "fraction_of_ceiling": gbps / 3000.0},
        "memory": {"peak_bytes": nbytes},
        "signature": {"expected_launches": launches, "expected_kernels": kernels, "observed_launches": launches,
                      "matches": True},
        "kernels": [{"name": k, "calls": 1, "grid": [128, 1, 1], "block": [256, 1, 1], "registers": 32,
                     "static_shared_bytes": 0, "dynamic_shared_bytes": 0} for k in kernels],
        "findings": [],
    }


def receipt(seed, commit_time, blobs, device="NVIDIA H100 80GB HBM3"):
    rng = random.Random(seed)
    cases = []
    for row, block, families, launches, kernels, median in ROWS:
        for variant, li, fac in (("fused", 0, 0.6), ("fallback", 1, 1.0)):
            for fam, shape in families.items():
                scale = 1.0 if fam in ("llama7b",) else 1.9
                cases.append(case(rng, row, block, variant, fam, shape, launches[li], kernels[li], median * fac * scale))
    return {
        "kind": "megabench.receipt", "schema_version": 2, "run_id": "%032x" % seed, "status": "complete",
        "started_at": "2025-01-0%dT10:00:00Z" % (1 + seed % 9), "finished_at": "2025-01-0%dT10:05:00Z" % (1 + seed % 9),
        "backend": "cuda", "tool": {"name": "megabench", "version": "0.1.0"},
        "command": ["megabench", "run", "suites/golden.toml"],
        "provenance": {"available": True, "origin": "binary", "workdir": "/src/megabench", "commit": blobs["commit"],
                       "commit_time": commit_time, "branch": "main", "dirty": False, "describe": blobs["describe"],
                       "sources": [{"path": p, "blob_id": b, "modified": False} for p, b in blobs["sources"]],
                       "executable": {"path": "/src/megabench/build/megabench", "blob_id": blobs["executable"],
                                      "bytes": 3000000}},
        "build": {"version": "0.1.0", "c_compiler": "gcc 12.2.0", "c_args": "-O2 -g -std=c17", "buildtype": "debugoptimized",
                  "cuda_compiler": "nvcc 12.4", "cuda_args": "", "cuda_archs": ["90"],
                  "features": {"cuda": True, "cupti": True, "nccl": False}},
        "host": {"hostname": "gpu-01", "os": "Linux", "arch": "x86_64", "cpu_model": "Xeon", "cpu_count": 16,
                 "memory_bytes": 137438953472},
        "device": {"backend": "cuda", "name": device, "index": 0, "compute_capability": "9.0", "sm_count": 132,
                   "memory_bytes": 85520809984, "l2_bytes": 52428800, "driver_version": "550.54.15",
                   "runtime_version": "12.4"},
        "suite": {"path": "suites/golden.toml", "name": "golden", "blob_id": "1" * 40},
        "settings": {"backend_requested": "cuda", "seed": seed, "modes": ["hot"], "max_noise": 0.005, "min_samples": 30,
                     "min_time_s": 0.1, "timeout_s": 60, "warmup": 10, "max_check_rows": 64, "rows": [], "dtypes": []},
        "ceilings": {"copy_gbps": 3000.0, "gemm_tflops": None},
        "goodput": {"wall_ns": 300000000000, "goodput_ns": 100000000000, "goodput_fraction": 1 / 3,
                    "badput_ns": {"context_load": 1, "ceilings": 1, "input_generation": 1, "reference": 1,
                                  "correctness": 1, "warmup": 1, "l2_flush": 0, "idle_host": 1}},
        "summary": {"cases": len(cases), "ok": len(cases), "failed": 0, "skipped": 0, "crashed": 0, "timeout": 0,
                    "oom": 0, "converged": len(cases), "findings": 0},
        "cases": cases,
    }


def sources(seed):
    rng = random.Random(seed)
    out = {"commit": oid(rng), "describe": "v0.1-%d-g%s" % (seed, "%07x" % (seed * 7919)),
           "sources": [("src/kernels/rmsnorm.cu", oid(rng)), ("src/reference/rmsnorm.c", oid(rng)),
                       ("src/kernels/rope.cu", oid(rng)), ("src/reference/rope.c", oid(rng)),
                       ("src/kernels/common.cuh", oid(rng))]}
    # drawn last, so that the ids above are what they were before receipts had it
    out["executable"] = oid(rng)
    return out


def checkout_provenance(r):
    """Turn `r` into a receipt of schema version 1: its source ids read from
    a checkout at run time, not embedded in the binary that ran."""
    r["schema_version"] = 1
    del r["provenance"]["origin"]
    del r["provenance"]["executable"]


def find(r, cid_prefix):
    return [c for c in r["cases"] if c["id"].startswith(cid_prefix)]


def retime(c, seed, factor):
    c["timing"] = timing(random.Random(seed), c["timing"]["median_ns"], c["timing"]["launches_per_call"], factor)


def fail(r, c):
    c["status"] = "failed"
    c["correctness"].update({"passed": False, "max_abs": 0.5, "max_rel": 0.9, "over_tolerance": 4096})
    r["summary"]["ok"] -= 1
    r["summary"]["failed"] += 1


H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"


def shard(r, names, slot_of, topology="nvlink"):
    """Spread r's cases over the GPUs `names` as `run --gpus` does:
    slot_of(case) is the GPU that ran each case (None: a case across GPUs,
    which names none)."""
    n = len(names)
    r["gpu_count"] = n
    r["gpus"] = [{"index": i, "name": name, "uuid": "GPU-%08x-0000-4000-8000-000000000000" % i,
                  "pci_bus_id": "00000000:%02X:00.0" % (0x18 + 0x20 * i),
                  "nvlinks_active": 18 if topology == "nvlink" else 0} for i, name in enumerate(names)]
    r["topology"] = {"source": "nvml", "class": topology if n > 1 else "single",
                     "links": [{"a": a, "b": b, "kind": topology, "pcie_path": "SYS", "peer_access": True,
                                "performance_rank": 0} for a in range(n) for b in range(a + 1, n)]}
    counts = [0] * n
    for c in r["cases"]:
        slot = slot_of(c)
        if slot is not None:
            c["gpu"] = slot
            counts[slot] += 1
    r["shards"] = [{"gpu": i, "rows": sorted({c["row"] for c in r["cases"] if c.get("gpu") == i}),
                    "estimated_s": 150.0, "cases": counts[i], "wall_ns": 150000000000,
                    "ended": "exited with status 0"} for i in range(n)]
    r["device"]["name"] = names[0]


def by_row(c):
    """rmsnorm on the first GPU, rope on the second."""
    return 0 if c["row"] == "rmsnorm" else 1


def across(r, n, topology):
    """rope's cases each span n GPUs (a row across GPUs), over `topology`."""
    shard(r, [H100] * n, lambda c: None if c["row"] == "rope" else 0, topology)
    for c in find(r, "rope/"):
        c["collective"] = {"gpus": n, "launcher": "single_process", "busbw_gbps": 300.0 * (n - 1) / n}


def scenarios():
    base_src, head_src = sources(1), sources(2)
    out = {}

    def pair(same_code=False, device=None):
        b = receipt(11, 1735725600, base_src)
        h = receipt(12, 1735812000, base_src if same_code else head_src, device or "NVIDIA H100 80GB HBM3")
        return b, h

    b, h = pair()
    retime(find(h, "rmsnorm/fused/bf16/hot/llama7b")[0], 101, 1.05)
    out["regression"] = (b, h, 1, None)

    b, h = pair()
    for i, c in enumerate(find(h, "rope/fused")):
        retime(c, 200 + i, 0.95)
    out["improvement"] = (b, h, 0, "# a stricter minimum effect for this repository\nmin_effect = 0.03\n\n"
                                   "[rows.rope]\nnoise_ceiling = 0.02\n")

    b, h = pair()
    fail(h, find(h, "rope/fused/bf16/hot/mixtral")[0])
    out["wrong_answer"] = (b, h, 2, None)

    b, h = pair()
    for c in find(h, "rmsnorm/fused"):
        c["correctness"]["tolerance"] = {"abs": 0.02, "rel": 0.04, "rationale": "bf16 output, loosened for the new reduction order"}
    out["tolerance_loosened"] = (b, h, 2, None)

    b, h = pair()
    for c in find(h, "rmsnorm/fallback"):
        c["timing"]["launches_per_call"] = 2
        c["signature"]["observed_launches"] = 2
        c["signature"]["expected_launches"] = 2
        c["kernels"] = [k for k in c["kernels"] if k["name"] != "mul_weight"]
        c["signature"]["expected_kernels"] = [k["name"] for k in c["kernels"]]
    out["launch_count_changed"] = (b, h, 2, None)

    b, h = pair(device="NVIDIA A100-SXM4-80GB")
    out["incomparable_devices"] = (b, h, 3, None)

    b, h = pair(same_code=True)
    # the machine drifted, the code did not: identical code must say SAME
    for i, c in enumerate(find(h, "rope/")):
        retime(c, 300 + i, 1.04)
    out["identical_code"] = (b, h, 0, None)

    # ---- identical code, and what identity covers ----
    b, h = pair(same_code=True)
    # nothing in the code changed, yet one case is 1.5x slower: the machine
    # or the harness changed, and the gate must not pass it
    retime(find(h, "rmsnorm/fused/bf16/hot/llama7b")[0], 400, 1.5)
    out["identical_code_machine_changed"] = (b, h, 3, None)
    # the same pair under a policy whose loose bound is above the change
    out["identical_code_bound_policy"] = (b, h, 0, "# this machine drifts a lot between runs\n"
                                                   "[rows.rmsnorm]\nidentical_code_max_change = 0.6\n")

    def drift_rope(h):
        for i, c in enumerate(find(h, "rope/")):
            retime(c, 300 + i, 1.04)

    b, h = pair(same_code=True)
    # a header named after no row belongs to every row: no row is identical
    h["provenance"]["sources"][4]["blob_id"] = "e" * 40
    drift_rope(h)
    out["shared_file_changed"] = (b, h, 1, None)

    b, h = pair(same_code=True)
    # the quantiles the sampler takes its median and noise from live in
    # receipts/stats.c: a change there is a change of timing code
    for r, blob in ((b, "a"), (h, "f")):
        r["provenance"]["sources"].append({"path": "src/receipts/stats.c", "blob_id": blob * 40, "modified": False})
    drift_rope(h)
    out["stats_changed"] = (b, h, 1, None)

    b, h = pair(same_code=True)
    # a printer decides no timing: the code stays identical
    for r, blob in ((b, "a"), (h, "f")):
        r["provenance"]["sources"].append({"path": "src/receipts/print_table.c", "blob_id": blob * 40,
                                           "modified": False})
    drift_rope(h)
    out["printer_changed"] = (b, h, 0, None)

    b, h = pair(same_code=True)
    # a source listed on one side only is a difference
    h["provenance"]["sources"].append({"path": "src/kernels/rows.def", "blob_id": "d" * 40, "modified": False})
    drift_rope(h)
    out["source_only_in_head"] = (b, h, 1, None)

    b, h = pair(same_code=True)
    # a new compiler is new code
    h["build"]["c_compiler"] = "gcc 13.2.0"
    drift_rope(h)
    out["compiler_changed"] = (b, h, 1, None)

    b, h = pair(same_code=True)
    # rope's kernel changed: rope is compared by the tests (and is slower);
    # rmsnorm's files did not, so its 4% drift is SAME by identical code
    h["provenance"]["sources"][2]["blob_id"] = "c" * 40
    drift_rope(h)
    for i, c in enumerate(find(h, "rmsnorm/")):
        retime(c, 310 + i, 1.04)
    out["other_row_changed"] = (b, h, 1, None)

    # ---- identical code only from what the binaries embedded ----
    b, h = pair(same_code=True)
    # version 1 receipts: the same source ids, read from a checkout, say
    # nothing certain about the binaries (a planted slow-down ran under an
    # unchanged checkout): rope's 4% is tested, and SLOWER
    checkout_provenance(b)
    checkout_provenance(h)
    drift_rope(h)
    out["no_binary_provenance"] = (b, h, 1, None)

    b, h = pair(same_code=True)
    # the binaries embedded the same ids; the head ran inside a checkout
    # edited since its build: the checkout is not the code that ran, so
    # rope's 4% drift is still SAME by identical code
    h["provenance"]["checkout"] = {"workdir": "/home/dev/megabench", "matches": False,
                                   "differing": [{"path": "src/kernels/rope.cu", "change": "modified"}],
                                   "commit": h["provenance"]["commit"], "describe": "v0.1-1-g0001eef-dirty"}
    drift_rope(h)
    out["identical_binary_checkout_edited"] = (b, h, 0, None)

    b, h = pair(same_code=True)
    # the same pair as identical_code, with the shortcut off by policy
    drift_rope(h)
    out["identical_code_shortcut_off"] = (b, h, 1, "# statistics on every row, identical code or not\n"
                                                   "[gate]\nidentical_code_shortcut = false\n")

    # ---- drift the gate must see ----
    b, h = pair()
    del find(h, "rmsnorm/fused/bf16/hot/llama7b")[0]["timing"]["launches_per_call"]
    del find(h, "rmsnorm/fallback/bf16/hot/llama7b")[0]["signature"]
    del find(h, "rope/fused/bf16/hot/llama7b")[0]["kernels"]
    out["missing_fields"] = (b, h, 2, None)

    b, h = pair()
    c = find(h, "rope/fallback/bf16/hot/mixtral")[0]
    c.update({"status": "skipped", "error": "bf16 is not supported on this device",
              "correctness": None, "timing": None, "throughput": None})
    del c["signature"]
    del c["kernels"]
    h["summary"]["ok"] -= 1
    h["summary"]["skipped"] += 1
    out["ok_to_skipped"] = (b, h, 2, None)

    b, h = pair()
    fail(b, find(b, "rope/fused/bf16/hot/mixtral")[0])
    fail(h, find(h, "rope/fused/bf16/hot/mixtral")[0])
    out["still_wrong"] = (b, h, 2, None)

    # ---- blind spots of identical code and of a case's meaning ----
    b, h = pair(same_code=True)
    # identical code, but the head's case stopped at its timeout without
    # converging: its time is not known well enough for the loose bound
    c = find(h, "rmsnorm/fused/bf16/hot/llama7b")[0]
    c["timing"] = timing(random.Random(500), c["timing"]["median_ns"], c["timing"]["launches_per_call"],
                         converged=False, noise=0.02)
    h["summary"]["converged"] -= 1
    out["not_converged_identical_code"] = (b, h, 3, None)

    b, h = pair()
    # the same case, now said to run 100 times a step: the time it saves
    # per step is another number, whatever the kernels did
    for c in find(h, "rope/fused/bf16/hot/mixtral") + find(h, "rope/fallback/bf16/hot/mixtral"):
        c["weight"] = 100.0
    out["weight_changed"] = (b, h, 2, None)

    b, h = pair()
    # the variant named "fused" is now a vendor library: rmsnorm's verdict
    # no longer compares a fused kernel against its fallback
    for c in find(h, "rmsnorm/fused/"):
        c["variant_kind"] = "vendor"
    out["variant_kind_changed"] = (b, h, 2, None)

    b, h = pair()
    # passed although 5 elements are over tolerance (head), and failed with
    # nothing wrong and the norm within 1% (base): both refused
    find(h, "rmsnorm/fused/bf16/hot/llama7b")[0]["correctness"]["over_tolerance"] = 5
    c = find(b, "rope/fused/bf16/hot/mixtral")[0]
    fail(b, c)
    c["correctness"].update({"max_abs": 0.0031, "max_rel": 0.0042, "over_tolerance": 0})
    out["inconsistent_receipt"] = (b, h, 3, None)

    # ---- inconclusive, each reason named ----
    b, h = pair()
    c = find(h, "rmsnorm/fused/bf16/hot/llama7b")[0]
    c["timing"] = timing(random.Random(500), c["timing"]["median_ns"], 1, 1.01, converged=False)
    c = find(h, "rmsnorm/fused/bf16/hot/llama70b")[0]
    c["timing"]["source"] = "events"
    c = find(h, "rmsnorm/fallback/bf16/hot/llama7b")[0]
    c["timing"]["excluded"] = list(range(len(c["timing"]["samples_ns"])))
    c = find(h, "rmsnorm/fallback/bf16/hot/llama70b")[0]
    c["timing"] = timing(random.Random(501), c["timing"]["median_ns"], 3, 1.3, noise=0.4)
    out["inconclusive_reasons"] = (b, h, 3, None)

    b, h = pair(device="NVIDIA H100 80GB HBM3")
    h["settings"]["modes"] = ["cold"]
    h["settings"]["warmup"] = 3
    out["incomparable_settings"] = (b, h, 3, None)

    # ---- ambiguous, with a direction ----
    b, h = pair()
    c = find(h, "rope/fused/bf16/hot/llama7b")[0]
    c["timing"] = timing(random.Random(600), c["timing"]["median_ns"], 1, 0.98, noise=0.01)
    out["ambiguous_faster"] = (b, h, 0, None)

    b, h = pair()
    c = find(h, "rope/fused/bf16/hot/llama7b")[0]
    c["timing"] = timing(random.Random(601), c["timing"]["median_ns"], 1, 1.02, noise=0.01)
    out["ambiguous_slower"] = (b, h, 3, None)

    # ---- tails: 500 calls a side, medians unchanged ----
    b, h = pair()
    for cid, seed, tail in (("rmsnorm/fused/bf16/hot/llama7b", 700, "slowest"),
                            ("rmsnorm/fused/bf16/hot/llama70b", 710, "mixture")):
        cb, ch = find(b, cid)[0], find(h, cid)[0]
        med = cb["timing"]["median_ns"]
        cb["timing"] = timing(random.Random(seed), med, 1, samples=500)
        ch["timing"] = timing(random.Random(seed + 1), med, 1, samples=500, tail=tail)
    out["tail_regression"] = (b, h, 1, None)

    # ---- between-run noise: three passes a case, each at a level of its own ----
    def with_repetitions(r, seed, factor_of=lambda c: 1.0):
        rng = random.Random(seed)
        r["settings"]["repetitions"] = 3
        for c in r["cases"]:
            levels = [math.exp(rng.gauss(0.0, 0.03)) for _ in range(3)]
            c["timing"] = timing_reps(rng, c["timing"]["median_ns"] * factor_of(c), c["timing"]["launches_per_call"],
                                      levels)

    b, h = pair()
    with_repetitions(b, 800)
    with_repetitions(h, 801)
    out["repetitions_aa"] = (b, h, 0, None)

    b, h = pair()
    with_repetitions(b, 800)
    with_repetitions(h, 801, lambda c: 1.25 if c["id"].startswith("rmsnorm/fused/bf16/hot/llama7b") else 1.0)
    out["repetitions_regression"] = (b, h, 1, None)

    # ---- GPUs: sharding alone compares; models per case; cases across GPUs ----
    b, h = pair()
    shard(h, [H100, H100], by_row)
    out["sharded_vs_single"] = (b, h, 0, None)

    b, h = pair()
    # two models in each receipt, each case on the same model on both sides
    shard(b, [H100, A100], by_row)
    shard(h, [H100, A100], by_row)
    out["gpu_models_alike"] = (b, h, 0, None)

    b, h = pair()
    # rope ran on an A100 in base, on an H100 in head
    shard(b, [H100, A100], by_row)
    shard(h, [H100, H100], by_row)
    out["incomparable_gpu_models"] = (b, h, 3, None)

    b, h = pair()
    across(b, 2, "nvlink")
    across(h, 2, "pcie")
    out["incomparable_topology"] = (b, h, 3, None)

    b, h = pair()
    across(b, 2, "nvlink")
    across(h, 4, "nvlink")
    out["incomparable_gpu_span"] = (b, h, 3, None)
    return out


def aa_runs(n, seed):
    """n runs of one revision on a machine whose level moves by about 8%
    from run to run, case by case (a busy CPU)."""
    rng = random.Random(seed)
    runs = []
    for k in range(n):
        r = receipt(900 + k, 1735725600, sources(1))
        for i, c in enumerate(r["cases"]):
            retime(c, 1000 * k + i, math.exp(rng.gauss(0.0, 0.08)))
        runs.append(r)
    return runs


INCONCLUSIVE_COMPARED = ("identical_code_machine_changed", "inconclusive_reasons", "ambiguous_slower",
                         "not_converged_identical_code")


def write(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else HERE
    for name, (b, h, code, policy) in scenarios().items():
        d = os.path.join(outdir, name)
        os.makedirs(d, exist_ok=True)
        write(os.path.join(d, "base.json"), b)
        write(os.path.join(d, "head.json"), h)
        with open(os.path.join(d, "expected_exit"), "w") as f:
            f.write("%d\n" % code)
        # diff exits 3 only when it refuses the pair; a gate's 3 for
        # inconclusive timing is a 0 for diff
        if name in INCONCLUSIVE_COMPARED:
            with open(os.path.join(d, "expected_diff_exit"), "w") as f:
                f.write("0\n")
        pol = os.path.join(d, "policy.toml")
        if policy:
            with open(pol, "w") as f:
                f.write(policy)
        elif os.path.exists(pol):
            os.remove(pol)
    # noise-floor: four A/A runs to learn from (aa/), and two more of the
    # same revision as base and head; policy.toml is what `megabench
    # noise-floor aa/*.json` writes (run_gate.sh checks it and --bless
    # writes it). Without it the pair fails (expected_exit_default).
    d = os.path.join(outdir, "noise_floor_learned")
    os.makedirs(os.path.join(d, "aa"), exist_ok=True)
    runs = aa_runs(6, 950)
    for k in range(4):
        write(os.path.join(d, "aa", "r%d.json" % (k + 1)), runs[k])
    write(os.path.join(d, "base.json"), runs[4])
    write(os.path.join(d, "head.json"), runs[5])
    with open(os.path.join(d, "expected_exit"), "w") as f:
        f.write("0\n")
    with open(os.path.join(d, "expected_exit_default"), "w") as f:
        f.write("3\n")


if __name__ == "__main__":
    main()

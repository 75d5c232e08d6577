#!/usr/bin/env python3
"""Write the promotion scenarios of the gate golden tests (run by
tests/golden/run_gate.sh like tests/golden/gate/, kept in a folder of their
own because the gate/ folders seed the diff fuzzer, whose invariant predates
exit code 4).

Each is derived from ../gate/identical_code/ (two receipts of one revision whose
rows rmsnorm and rope win every pair in isolation): a top-level `catalog`
with each row's status as built, and, where the scenario needs run-level
evidence, a synthetic lane whose step gets slower (the fused row wins) or
not with the row alone on its fallback. expected.md is written by
run_gate.sh --bless and reviewed by hand.

promotion_on_cpu/ is not written here: one receipt of
`megabench run suites/smoke.toml --backend cpu --rows rope_qk --dtypes bf16`
as the base, and as the head with rope_qk's status edited to keep, which the CPU backend
(reference variant only) can neither support nor refute: not checked, pass.

Usage: gen.py [OUTDIR]   (default: the folder of this script).
Seeded: the same script always writes the same bytes.
"""
import copy
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
STEP_NS = 1_000_000
STEPS = 20
ROUNDS = 3
NOISE = 0.002
H200 = "NVIDIA H200"
LANE_WIN = 0.05     # the step 5% slower with the row on its fallback: a lane win
# rmsnorm's llama7b fallback made as fast as its fused case: the row then wins
# on its llama70b family only
FAMILY_ONLY = "wins on family llama70b only"


def lane_run(rng, config, ns):
    steps = []
    medians = []
    for _ in range(ROUNDS):
        rnd = [round(ns * (1 + rng.gauss(0, NOISE))) for _ in range(STEPS)]
        steps += rnd
        medians.append(sorted(rnd)[STEPS // 2])
    med = sorted(steps)[len(steps) // 2]
    busy = [round(s * 0.9) for s in steps]
    return {"config": config, "mode": "eager", "step_ns": steps, "busy_ns": busy, "round_medians_ns": medians,
            "median_step_ns": med, "median_busy_ns": round(med * 0.9), "goodput": 0.9,
            "launch_gap_ns": med - round(med * 0.9), "memcpy_ns": 0, "memset_ns": 0, "median_host_ns": 1000,
            "first_step_ns": 1000}


def lane(row, fraction, seed):
    rng = random.Random(seed)
    fused = lane_run(rng, "fused", STEP_NS)
    slow = lane_run(rng, "fallback:" + row, STEP_NS * (1 + fraction))
    delta = slow["median_step_ns"] - fused["median_step_ns"]
    return {"name": "step", "pattern": "A", "shape": {"tokens": 4096}, "steps": STEPS, "warmup": 3,
            "rounds": ROUNDS, "modes": ["eager"],
            "ops": [{"block": 0, "label": row, "kind": "row", "row": row}],
            "rows": [{"row": row, "calls_per_step": 1}], "notes": [],
            "runs": [fused, slow],
            "deltas": [{"row": row, "config": "fallback:" + row, "mode": "eager",
                        "fused_step_ns": fused["median_step_ns"], "delta_ns": delta,
                        "delta_fraction": delta / fused["median_step_ns"],
                        "fallback_is": "SLOWER" if fraction > 0 else "SAME"}]}


def catalog(**rows):
    out = {"rmsnorm": {"status": "experimental"}, "rope": {"status": "experimental"}}
    for name, status in rows.items():
        out[name] = {"status": status[0], "condition": status[1]} if isinstance(status, tuple) else {"status": status}
    return out


def receipt(src, cat, lane_of=None, device=None):
    r = copy.deepcopy(src)
    r["catalog"] = cat
    if lane_of:
        r["lanes"] = [lane(*lane_of)]
    if device:
        r["device"]["name"] = device
    return r


SCENARIOS = {
    # promoted to keep, and the head's lane step shows the win: pass
    "promotion_with_evidence": (dict(), dict(rmsnorm="keep"), None, ("rmsnorm", LANE_WIN, 1), None, 0),
    # promoted to keep on isolated evidence only (no lane): 4
    "promotion_without_lanes": (dict(), dict(rmsnorm="keep"), None, None, None, 4),
    # the base (another device kind) has the lane evidence, the head's own
    # device has isolated evidence only: 4 (compared with --force)
    "promotion_other_device": (dict(), dict(rmsnorm="keep"), ("rmsnorm", LANE_WIN, 2), None, H200, 4),
    # a row claimed keep without a single case in the head: 4
    "promotion_without_cases": (dict(), dict(swiglu="keep"), None, None, None, 4),
    # keep in base and head, no case of the row in the head (an alltoall
    # receipt, a --rows subset): not checked, pass
    "unchanged_without_cases": (dict(swiglu="keep"), dict(swiglu="keep"), None, None, None, 0),
    # conditional under the condition the head's verdict names: pass
    "conditional_named": (dict(), dict(rmsnorm=("conditional", FAMILY_ONLY)), None, None, None, 0),
    # conditional under a condition the verdict does not name: 4
    "conditional_other_condition": (dict(), dict(rmsnorm=("conditional", "wins at hidden >= 8192")), None,
                                    None, None, 4),
    # keep with lane evidence in the base, demoted in the head to a
    # condition its isolated evidence does not show either: a demotion
    # never fails
    "demotion": (dict(rmsnorm="keep"), dict(rmsnorm=("conditional", "wins at hidden >= 8192")),
                 ("rmsnorm", LANE_WIN, 4), None, None, 0),
}


def family_only(r):
    """rmsnorm's llama7b fallback takes its fused case's timing: SAME there."""
    cases = {c["id"]: c for c in r["cases"]}
    fused = cases["rmsnorm/fused/bf16/hot/llama7b/tokens=4096,hidden=4096"]
    cases["rmsnorm/fallback/bf16/hot/llama7b/tokens=4096,hidden=4096"]["timing"] = copy.deepcopy(fused["timing"])
    return r


# the scenarios whose receipts win on one family only
FAMILY_ONLY_HEADS = ("conditional_named", "conditional_other_condition")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    src = os.path.join(HERE, "..", "gate", "identical_code")
    base = json.load(open(os.path.join(src, "base.json")))
    head = json.load(open(os.path.join(src, "head.json")))
    for name, (bcat, hcat, blane, hlane, bdevice, exit_code) in SCENARIOS.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "base.json"), "w") as f:
            # both sides, so that the case compares SAME between them
            b = receipt(base, catalog(**bcat), blane, bdevice)
            json.dump(family_only(b) if name in FAMILY_ONLY_HEADS else b, f, indent=1)
            f.write("\n")
        with open(os.path.join(d, "head.json"), "w") as f:
            # across device kinds the code-identical shortcut does not apply:
            # the head repeats the base's cases, so that only the claim fails
            h = receipt(base if bdevice else head, catalog(**hcat), hlane)
            json.dump(family_only(h) if name in FAMILY_ONLY_HEADS else h, f, indent=1)
            f.write("\n")
        with open(os.path.join(d, "expected_exit"), "w") as f:
            f.write("%d\n" % exit_code)
        if bdevice:
            with open(os.path.join(d, "args"), "w") as f:
                f.write("--force\n")
            with open(os.path.join(d, "expected_diff_exit"), "w") as f:
                f.write("0\n")


if __name__ == "__main__":
    main()

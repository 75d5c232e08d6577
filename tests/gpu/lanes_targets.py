#!/usr/bin/env python3
"""The lanes' targets (issue 21) read from one receipt: per lane its wall
time, rows and per-mode rounds (seed, rounds, why they stopped, the
all-fused step's round-to-round noise, the delta every configuration
resolves); the all-fused step per mode; every delta (row, variant, mode,
step delta, class); the rows that run fused only; then each target against
its measured value:
  - every catalog row of the lane in its step, with a delta in eager mode;
  - graph mode's all-fused round-to-round noise under 0.5%;
  - the lanes' wall time, set-up included, at most 90 s.
Usage: lanes_targets.py RECEIPT.json[.gz]"""
import sys

from receipt_file import load

NOISE_TARGET = 0.005
WALL_TARGET_S = 90.0


def pct(x):
    return f"{100 * x:.2f}%" if isinstance(x, (int, float)) else "-"


def main():
    r = load(sys.argv[1])
    lanes = r.get("lanes") or []
    results = []
    wall_s = 0.0
    if not lanes:
        print("no lanes in the receipt")
        return 1
    for lane in lanes:
        name = lane["name"]
        wall = (lane.get("wall_ns") or 0) / 1e9
        wall_s += wall
        print(f"lane {name} ({lane['pattern']}): {wall:.1f} s, {len(lane['runs'])} runs, "
              f"{(lane.get('device_bytes') or 0) / 2**30:.1f} GiB of buffers, "
              f"{(lane.get('step_flops') or 0) / 1e12:.2f} TFLOP of GEMMs a step")
        if lane.get("error"):
            print(f"  error: {lane['error']}")
        print("  rows: " + ", ".join(f"{x['row']} x{x['calls_per_step']}" for x in lane["rows"]))
        for s in lane.get("stopping", []):
            print(f"  {s['mode']}: {s['rounds']} rounds in {s['wall_ns'] / 1e9:.1f} s, stopped by {s['stopped']}; "
                  f"all-fused round to round {pct(s.get('fused_round_noise'))}; resolves {pct(s.get('resolvable_delta'))} "
                  f"(worst {s.get('worst_config', '-')}); seed {s['seed']}")
        for run in lane["runs"]:
            if run["config"] in ("fused", "fallback"):
                print(f"  {run['config']:8s} {run['mode']:5s} step {run['median_step_ns'] / 1e6:9.3f} ms, "
                      f"goodput {run['goodput']:.3f}, rounds {[round(x / 1e6, 3) for x in run['round_medians_ns']]}")
        for d in sorted(lane["deltas"], key=lambda d: (d["row"], d["mode"], d.get("variant", ""))):
            print(f"  {d['row']:22s} {d.get('variant', 'fallback'):15s} {d['mode']:5s} "
                  f"{d['delta_ns'] / 1e3:+10.1f} us {100 * d['delta_fraction']:+7.2f}%  {d['fallback_is']}")
        for f in lane.get("fused_only", []):
            print(f"  fused only: {f['row']} ({f['mode']}): {f['why']}")
        have = {x["row"] for x in lane["rows"]}
        eager = {d["row"] for d in lane["deltas"] if d["mode"] == "eager"}
        results.append((f"{name}: every row has an eager delta", have <= eager, ", ".join(sorted(have - eager)) or "all"))
        for s in lane.get("stopping", []):
            if s["mode"] == "graph":
                noise = s.get("fused_round_noise")
                results.append((f"{name}: graph all-fused round-to-round noise < {pct(NOISE_TARGET)}",
                                isinstance(noise, (int, float)) and noise < NOISE_TARGET, pct(noise)))
    results.append((f"lanes' wall time <= {WALL_TARGET_S:.0f} s", wall_s <= WALL_TARGET_S, f"{wall_s:.1f} s"))
    print()
    for what, ok, value in results:
        print(f"{'PASS' if ok else 'MISS'}  {what}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

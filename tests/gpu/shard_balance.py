#!/usr/bin/env python3
"""How a sharded run came out against a one-GPU run of the same plan
(issue 23's targets: two GPUs at most 0.6 of one GPU's wall time, four at
most 0.35): each run's wall time (finished_at - started_at, the parent's),
the sharded one's over the one-GPU one's, and per GPU of a sharded run what
the deal predicted (shards[].estimated_s) against the worker's wall time,
with the balance both ways (the largest over the mean) and the rows split.
A receipt of one GPU whose cases record wall_ns also says how its cases'
wall times add up against the run's.

usage: shard_balance.py ONE_GPU.json SHARDED.json [SHARDED.json...]
"""
import datetime
import sys

from receipt_file import load


def elapsed_s(r):
    t = [datetime.datetime.strptime(r[k], "%Y-%m-%dT%H:%M:%S.%fZ") for k in ("started_at", "finished_at")]
    return (t[1] - t[0]).total_seconds()


def balance(values):
    mean = sum(values) / len(values)
    return max(values) / mean if mean > 0 else 1.0


def describe(name, r):
    bad = sum(1 for c in r["cases"] if c["status"] != "ok")
    print("%s: %d cases (%d not ok), %d GPU%s, wall %.1f s, goodput %.3f" % (
        name, len(r["cases"]), bad, r.get("gpu_count", 1), "" if r.get("gpu_count", 1) == 1 else "s",
        elapsed_s(r), r["goodput"]["goodput_fraction"]))
    walls = [c["wall_ns"] / 1e9 for c in r["cases"] if "wall_ns" in c]
    if walls:
        print("  cases' wall_ns add up to %.1f s of the workers' %.1f s" % (sum(walls), r["goodput"]["wall_ns"] / 1e9))
    plan = r.get("shard_plan")
    if plan:
        print("  cost model %s (%s), model x%.3g; split: %s; planned balance %.3f, bound %.1f s" % (
            plan["cost_model"], ", ".join("%s: %d cases" % (s["path"], s["cases"]) for s in plan["receipts"]) or "-",
            plan["model_scale"], ", ".join(plan["split_rows"]) or "none", plan["balance"], plan["bound_s"]))
    shards = r.get("shards", [])
    if len(shards) > 1:
        for s in shards:
            print("  gpu%d: predicted %6.1f s, worker %6.1f s, %3d cases%s: %s" % (
                s["gpu"], s["estimated_s"], s["wall_ns"] / 1e9, s["cases"], ", lanes" if s.get("lanes") else "",
                ", ".join(s["rows"])))
        print("  balance: predicted %.3f, measured %.3f (largest worker over the mean)" % (
            balance([s["estimated_s"] for s in shards]), balance([s["wall_ns"] / 1e9 for s in shards])))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    one = load(sys.argv[1])
    describe(sys.argv[1], one)
    for path in sys.argv[2:]:
        r = load(path)
        describe(path, r)
        print("  wall time over the one-GPU run's: %.3f" % (elapsed_s(r) / elapsed_s(one)))


if __name__ == "__main__":
    main()

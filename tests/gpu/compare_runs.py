#!/usr/bin/env python3
"""Two receipts of one suite side by side (an older revision and this one):
wall time, goodput and the badput split of each, and per case the ratio of
the medians; then any further receipts' wall time and goodput.

usage: compare_runs.py OLD.json NEW.json [MORE.json...]
"""
import sys

from receipt_file import load


def breakdown(name, r):
    g = r["goodput"]
    wall = g["wall_ns"]
    print("%s: %s, %d cases, wall %.1f s, goodput %.3f" % (
        name, r["provenance"].get("describe", "?"), len(r["cases"]), wall / 1e9, g["goodput_fraction"]))
    parts = [("timed kernel work", g["goodput_ns"])] + sorted(g["badput_ns"].items(), key=lambda kv: -kv[1])
    for what, ns in parts:
        print("  %-18s %8.2f s  %5.1f%%" % (what, ns / 1e9, 100.0 * ns / wall))
    over = g.get("overlapped_ns", {}).get("host_work")
    if over is not None:
        print("  %-18s %8.2f s  (host work overlapped with timing, not in the wall time)" % ("overlapped", over / 1e9))
    bad = [c["id"] for c in r["cases"] if c["status"] != "ok"]
    print("  cases not ok: %d%s" % (len(bad), (": " + ", ".join(bad[:5])) if bad else ""))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    old, new = load(sys.argv[1]), load(sys.argv[2])
    breakdown("old", old)
    breakdown("new", new)
    print("wall time new/old: %.3f" % (new["goodput"]["wall_ns"] / old["goodput"]["wall_ns"]))
    olds = {c["id"]: c for c in old["cases"] if c.get("timing")}
    ratios = []
    for c in new["cases"]:
        o = olds.get(c["id"])
        if not (o and c.get("timing")):
            continue
        r = c["timing"]["median_ns"] / o["timing"]["median_ns"]
        ratios.append((abs(r - 1), r, c["id"]))
    ratios.sort(reverse=True)
    within = sum(1 for d, _, _ in ratios if d <= 0.01)
    print("medians: %d of %d cases within 1%% (largest differences below)" % (within, len(ratios)))
    for d, r, cid in ratios[:8]:
        print("  x%.4f  %s" % (r, cid))
    correct = sum(1 for c in new["cases"] if (c.get("correctness") or {}).get("passed"))
    print("new: %d of %d cases correct" % (correct, len(new["cases"])))
    for path in sys.argv[3:]:
        breakdown(path, load(path))


if __name__ == "__main__":
    main()

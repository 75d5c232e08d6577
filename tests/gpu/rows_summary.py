#!/usr/bin/env python3
"""Per catalog row, from one or more receipts of suites/nam56r.toml:
the fused variant's fraction of the copy ceiling at the row's largest shape
in bf16 (cold mode), the fused/fallback speedup at every shape and dtype, and
whether every case was correct.

usage: rows_summary.py RECEIPT.json...
"""
import sys
from collections import defaultdict

from receipt_file import load

TARGET = 0.90


def shape_key(case):
    return tuple(sorted(case["shape"].items()))


def size(case):
    return case["throughput"]["bytes"] if case.get("throughput") else 0


def main():
    cases = []
    for path in sys.argv[1:]:
        cases += load(path)["cases"]
    by_row = defaultdict(list)
    for c in cases:
        by_row[c["row"]].append(c)
    misses = 0
    for row, cs in by_row.items():
        bad = [c["id"] for c in cs if c["status"] != "ok"]
        fused = {(c["dtype"], c["mode"], c["family"], shape_key(c)): c for c in cs if c["variant"] == "fused" and c["status"] == "ok"}
        fallback = {(c["dtype"], c["mode"], c["family"], shape_key(c)): c for c in cs if c["variant"] == "fallback" and c["status"] == "ok"}
        print("== %s: %d cases, %d not ok%s" % (row, len(cs), len(bad), (": " + ", ".join(bad)) if bad else ""))
        bf16_cold = [c for k, c in fused.items() if k[0] == "bf16" and k[1] == "cold"]
        if bf16_cold:
            big = max(bf16_cold, key=size)
            frac = big["throughput"]["fraction_of_ceiling"]
            misses += frac is None or frac < TARGET
            print("   largest bf16 cold shape %s: fused %.1f us, %.0f GB/s, %.3f of the copy ceiling%s" % (
                dict(big["shape"]), big["timing"]["median_ns"] / 1e3, big["throughput"]["gbps"], frac,
                "" if frac >= TARGET else "  BELOW %.2f" % TARGET))
        for k in sorted(fused):
            if k in fallback:
                f, b = fused[k], fallback[k]
                print("   %-4s %-4s %-16s %-38s fused %9.1f us (%.3f)  fallback %9.1f us (%.3f)  x%.2f" % (
                    k[0], k[1], k[2], ",".join("%s=%d" % kv for kv in k[3]), f["timing"]["median_ns"] / 1e3,
                    f["throughput"]["fraction_of_ceiling"] or 0, b["timing"]["median_ns"] / 1e3,
                    b["throughput"]["fraction_of_ceiling"] or 0, b["timing"]["median_ns"] / f["timing"]["median_ns"]))
    sys.exit(1 if misses else 0)


if __name__ == "__main__":
    main()

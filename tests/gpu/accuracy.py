#!/usr/bin/env python3
"""Compare the harness's timings with ncu's and with CUDA events.

usage: accuracy.py RECEIPT.json NCU.csv
Prints, for the copy probe (own copy kernel) and for every case of the
receipt, the receipt median, the CUDA-event median and the ncu median of
gpu__time_duration.sum over the matching kernel, with the ratios. Exit 1 when
a ratio is off by more than 2%.
"""
import csv
import statistics
import sys

from receipt_file import load

LIMIT = 0.02


def ncu_durations(path):
    """kernel name -> list of gpu__time_duration.sum in ns"""
    out = {}
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # skip ncu's banner lines
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = row.get("Metric Unit", "")
        value = float(row["Metric Value"].replace(",", ""))
        scale = {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit, 1)
        out.setdefault(row["Kernel Name"], []).append(value * scale)
    return out


def pick(durations, needle):
    hits = [v for name, vals in durations.items() if needle in name for v in vals]
    return statistics.median(hits) if hits else None, len(hits)


def line(what, harness, events, ncu, n_ncu):
    bad = False
    text = "%-34s harness %10.1f ns" % (what, harness)
    if events:
        r = harness / events
        bad |= abs(r - 1) > LIMIT
        text += "  events %10.1f ns (x%.4f)" % (events, r)
    if ncu:
        r = harness / ncu
        bad |= abs(r - 1) > LIMIT
        text += "  ncu %10.1f ns over %d kernels (x%.4f)" % (ncu, n_ncu, r)
    print(text + ("  OFF BY > 2%" if bad else ""))
    return bad


def main():
    receipt = load(sys.argv[1])
    durations = ncu_durations(sys.argv[2])
    bad = False
    c = receipt["ceilings"]
    if c.get("copy_samples_ns"):
        ncu, n = pick(durations, "mb_ceiling_copy_kernel")
        bad |= line("copy probe (own kernel)", statistics.median(c["copy_samples_ns"]),
                    c.get("copy_events_median_ns"), ncu, n)
    for case in receipt["cases"]:
        t = case.get("timing")
        if not t:
            continue
        kernel = case["row"] + "_" + case["variant"]
        ncu, n = pick(durations, kernel)
        bad |= line(case["id"][:34], t["median_ns"], t.get("events_median_ns"), ncu, n)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Summarise ncu's per-instruction source page of one kernel launch.

    ncu --section SourceCounters -k regex:KERNEL -c 1 -o REPORT ...
    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > SASS.csv
    tests/gpu/sass_profile.py SASS.csv [--per N --unit NAME] [--top K]

Prints the instruction mix by opcode (warp instructions executed, their
share, and, with --per, per N of them: per element when N is the launch's
elements divided by 32), the warp-stall samples on each, and the K
instructions where most samples found a warp waiting, each with the few
instructions before it (a stall is sampled at the instruction that cannot
issue, so its cause is usually just above: the load whose register it
reads, the barrier it follows)."""
import argparse
import collections
import csv
import sys

from receipt_file import open_text

EXECUTED = "Instructions Executed"
SAMPLES = "Warp Stall Sampling (All Samples)"
NOT_ISSUED = "Warp Stall Sampling (Not-issued Samples)"


def read(path):
    try:
        return parse(path)
    except (OSError, ValueError, IndexError, csv.Error) as e:
        sys.exit(f"{path}: {e}")


def parse(path):
    with open_text(path, newline="") as f:
        rows = list(csv.reader(f))
    # the first row names the kernel, the second the columns
    if len(rows) < 3 or len(rows[0]) < 2 or EXECUTED not in rows[1]:
        sys.exit(f"{path}: not an ncu source page (--page source --csv --print-source sass)")
    head = rows[1]
    col = {name: head.index(name) for name in ("Address", "Source", EXECUTED, SAMPLES, NOT_ISSUED)}

    def cell(r, k):
        # ncu writes counts with thousands separators ("1,000")
        return r[k].replace(",", "").strip()

    def num(r, name):
        v = cell(r, col[name])
        return int(v) if v else 0

    # the samples by stall reason (stall_barrier, stall_long_sb, ...)
    reasons = [(k, name[len("stall_"):]) for k, name in enumerate(head)
               if name.startswith("stall_") and "(Not Issued)" not in name]

    def why(r):
        out = {}
        for k, name in reasons:
            v = cell(r, k)
            if v and float(v) > 0:
                out[name] = float(v)
        return out

    insts = [(r[col["Address"]], r[col["Source"]].strip(), num(r, EXECUTED), num(r, SAMPLES), num(r, NOT_ISSUED),
              why(r)) for r in rows[2:] if len(r) == len(head)]
    return rows[0][1], insts


def reasons_text(why, top=3):
    total = sum(why.values())
    if total <= 0:
        return ""
    parts = sorted(why.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{name} {v / total:.0%}" for name, v in parts)


def opcode(source):
    words = source.split()
    if words and words[0].startswith("@"):  # a predicate guard
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="ncu's source page as CSV (optionally .gz)")
    ap.add_argument("--per", type=float, help="divide executed counts by this (e.g. elements / 32)")
    ap.add_argument("--unit", default="unit", help="what --per counts, for the column's title")
    ap.add_argument("--top", type=int, default=8, help="stall sites to show (default 8)")
    ap.add_argument("--context", type=int, default=3, help="instructions shown before each (default 3)")
    a = ap.parse_args()
    if a.per is not None and a.per <= 0:
        sys.exit("--per must be positive")

    kernel, insts = read(a.csv)
    executed = sum(i[2] for i in insts)
    samples = sum(i[3] for i in insts)
    not_issued = sum(i[4] for i in insts)
    if executed == 0:
        sys.exit(f"{a.csv}: no instruction executed (was the launch profiled with SourceCounters?)")
    print(f"kernel: {kernel}")
    line = f"warp instructions executed: {executed:,}"
    if a.per:
        line += f", {executed / a.per:.2f} per {a.unit}"
    print(line)
    if samples:
        print(f"warp-stall samples: {samples:,}; {not_issued:,} ({not_issued / samples:.0%}) "
              "while the scheduler issued nothing")
        overall = collections.Counter()
        for i in insts:
            overall.update(i[5])
        print(f"by reason: {reasons_text(overall, top=6)}")

    by_op = collections.Counter()
    stalls = collections.Counter()
    for _, src, n, s, _, _ in insts:
        by_op[opcode(src)] += n
        stalls[opcode(src)] += s
    print()
    title = f"{'opcode':<10} {'executed':>14} {'share':>6}"
    if a.per:
        title += f" {'per ' + a.unit:>12}"
    print(title + f" {'samples':>8} {'share':>6}")
    for op, n in by_op.most_common():
        if n == 0:
            continue
        row = f"{op:<10} {n:>14,} {n / executed:>6.1%}"
        if a.per:
            row += f" {n / a.per:>12.2f}"
        print(row + f" {stalls[op]:>8,} {stalls[op] / samples if samples else 0:>6.1%}")

    if samples:
        print(f"\nwhere warps wait: the {a.top} instructions with the most samples, "
              f"each after the {a.context} before it")
        order = sorted(range(len(insts)), key=lambda k: -insts[k][3])[:a.top]
        for k in order:
            # the executed instructions just before it in the listing
            # (not a branch's source: read those by address)
            before = [j for j in range(k - 1, -1, -1) if insts[j][2] > 0][:a.context]
            print()
            for j in sorted(before) + [k]:
                addr, src, n, s, _, why = insts[j]
                print(f"{'>' if j == k else ' '} {addr[-6:]:>6} {n:>12,} {s:>7,} {s / samples:>6.1%}  {src}")
            print(f"         {reasons_text(insts[k][5])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

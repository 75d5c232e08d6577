#!/usr/bin/env python3
"""How busy a GPU host's CPU cores were during a run.

  host_cpu.py sample FILE      append, every half second until killed, the
                               time and /proc/stat's aggregate cpu line
  host_cpu.py report FILE...   per file (gzipped or not): the busy
                               core-seconds (all cores' non-idle time), the
                               run's length, and the busy share of all cores
                               in 5 s bins

Four GPUs' workers of one run share one host: where the host side (inputs,
references, checks) keeps every core busy, the run waits for the CPU, not
the GPUs (reports/h200/README.md, runs u and v)."""
import sys
import time

from receipt_file import open_text


def sample(path):
    with open(path, "a", buffering=1) as out:
        while True:
            with open("/proc/stat") as f:
                line = f.readline().strip()
            out.write("%.3f %s\n" % (time.time(), line))
            time.sleep(0.5)


def report(path):
    rows = []
    with open_text(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 10 or parts[1] != "cpu":
                continue
            ticks = [int(x) for x in parts[2:10]]
            rows.append((float(parts[0]), ticks[3] + ticks[4], sum(ticks)))
    if len(rows) < 2:
        print("%s: fewer than two samples" % path)
        return
    t0 = rows[0][0]
    busy_share, bins = [], {}
    for (t_a, idle_a, tot_a), (t_b, idle_b, tot_b) in zip(rows, rows[1:]):
        if tot_b <= tot_a:
            continue
        share = 1 - (idle_b - idle_a) / (tot_b - tot_a)
        busy_share.append((t_b - t_a, share))
        bins.setdefault(int((t_b - t0) // 5), []).append(share)
    length = rows[-1][0] - t0
    # /proc/stat counts every core's ticks: the busy share times the cores
    # and the interval is busy core-seconds
    cores = (rows[-1][2] - rows[0][2]) / max(length, 1e-9) / 100.0  # USER_HZ = 100
    busy = sum(dt * s for dt, s in busy_share) * cores
    print("%s: %.0f s, %.0f cores, %.0f busy core-seconds (%.0f%% of the cores' time)"
          % (path, length, cores, busy, 100 * busy / max(cores * length, 1e-9)))
    print("  busy share by 5 s: " + " ".join(
        "%d:%.0f%%" % (5 * k, 100 * sum(v) / len(v)) for k, v in sorted(bins.items())))


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("sample", "report"):
        sys.exit(__doc__)
    if sys.argv[1] == "sample":
        sample(sys.argv[2])
    for path in sys.argv[2:]:
        report(path)


if __name__ == "__main__":
    main()

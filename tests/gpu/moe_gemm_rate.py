#!/usr/bin/env python3
"""The MoE grouped GEMM kernels alone (issue 24's target: at least 0.60 of
the dense GEMM ceiling at T = 16384), from the heavy-ncu phase's ncu logs:
each moe_ffn_grouped_gemm launch's duration (ncu's Speed Of Light section),
its FLOPs (GEMM1 2 T K H C with C = F, or 2F for moe_ffn_swiglu; GEMM2
2 T K F H, at the shape the phase runs) and its rate against the GEMM
ceiling of a receipt of the same session (the heavy phase's).

Usage: moe_gemm_rate.py RECEIPT.json[.gz] NCU_LOG... (a log named
ncu-moe_ffn_swiglu.txt is moe_ffn_swiglu's; any other moe_ffn's)."""
import os
import re
import sys

from receipt_file import load

SHAPE = {"T": 16384, "H": 2048, "E": 64, "K": 6, "F": 1408}  # the heavy-ncu phase's filter: T=16384
TARGET = 0.60
UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "usecond": 1e-6, "ns": 1e-9, "nsecond": 1e-9, "msecond": 1e-3}


def launches(log):
    """(kernel name, duration in s) per profiled launch, in order."""
    out, name = [], None
    with open(log, errors="replace") as f:
        for line in f:
            m = re.match(r"\s+(?:void )?(moe_ffn_grouped_gemm\w*)(<[^>]*>)?\(", line)
            if m:
                name = m.group(1) + (m.group(2) or "")
                continue
            m = re.match(r"\s+Duration\s+(\S+)\s+([\d.,]+)", line)
            if m and name:
                out.append((name, float(m.group(2).replace(",", "")) * UNIT_S.get(m.group(1), float("nan"))))
                name = None
    return out


def gemm1(name):
    """GEMM1 gathers x's rows: the kernels' GATHER template argument (the
    wgmma kernel's second, the mma.sync kernel's fourth)."""
    args = [a.strip() for a in name[name.find("<") + 1:name.rfind(">")].split(",")]
    gather = args[1] if "wgmma" in name else (args[3] if len(args) > 3 else "")
    return gather in ("true", "1")


def main():
    ceiling = (load(sys.argv[1]).get("ceilings") or {}).get("gemm_tflops")
    t, h, k, f = SHAPE["T"], SHAPE["H"], SHAPE["K"], SHAPE["F"]
    print(f"grouped GEMM kernels alone at T={t} (ncu durations; GEMM ceiling {ceiling} TFLOP/s, target {TARGET})")
    for log in sys.argv[2:]:
        swiglu = "swiglu" in os.path.basename(log)
        c = 2 * f if swiglu else f
        total_flops = total_s = 0.0
        for name, sec in launches(log):
            flops = 2.0 * t * k * h * (c if gemm1(name) else f)
            rate = flops / sec / 1e12
            total_flops += flops
            total_s += sec
            frac = rate / ceiling if ceiling else float("nan")
            print(f"  {os.path.basename(log)}: {name[:70]:<70} {sec * 1e3:8.3f} ms {rate:6.1f} TFLOP/s {frac:5.3f}")
        if total_s:
            rate = total_flops / total_s / 1e12
            frac = rate / ceiling if ceiling else float("nan")
            print(f"  {'moe_ffn_swiglu' if swiglu else 'moe_ffn'} both GEMMs: {total_s * 1e3:.3f} ms, {rate:.1f} TFLOP/s, "
                  f"{frac:.3f} of the ceiling (target >= {TARGET}: {'met' if frac >= TARGET else 'missed'})")


if __name__ == "__main__":
    main()

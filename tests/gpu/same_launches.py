#!/usr/bin/env python3
"""Whether two receipts of one suite record the same launches: per case
the status, whether it passed, the signature's expected and observed
launch counts, and the bytes model launch by launch (kernel, bytes read
and written, and which medians are missing). Times are not compared. For a
change that must not alter what a receipt says about launches (where they
are stored, how errors travel): run the suite with the binary before and
after, then this. Exit 0 when every case agrees, 1 otherwise.

usage: same_launches.py BEFORE.json[.gz] AFTER.json[.gz]
"""
import sys

from receipt_file import load


def launches(case):
    model = (case.get("throughput") or {}).get("model_launches", [])
    signature = case.get("signature") or {}
    return (
        case["status"],
        (case.get("correctness") or {}).get("passed"),
        signature.get("expected_launches"),
        signature.get("observed_launches"),
        signature.get("matches"),
        [(m.get("kernel"), m.get("read_bytes"), m.get("write_bytes"), m.get("median_ns") is None) for m in model],
    )


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    before = {c["id"]: c for c in load(sys.argv[1])["cases"]}
    after = {c["id"]: c for c in load(sys.argv[2])["cases"]}
    same = differ = modelled = 0
    for case_id in sorted(set(before) | set(after)):
        a, b = before.get(case_id), after.get(case_id)
        if a is None or b is None:
            differ += 1
            print("only in %s: %s" % ("after" if a is None else "before", case_id))
        elif launches(a) != launches(b):
            differ += 1
            print("DIFFERS %s\n  before %s\n  after  %s" % (case_id, launches(a), launches(b)))
        else:
            same += 1
            modelled += len(launches(a)[5])
    print("%d cases the same, %d differ; %d modelled launches compared" % (same, differ, modelled))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

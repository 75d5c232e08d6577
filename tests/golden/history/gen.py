#!/usr/bin/env python3
"""Write the nightly-history golden folders: each holds receipts/ (one
receipt per nightly, derived from ../gate/identical_code/head.json, whose
rows rmsnorm and rope win every pair) and expected.md, the exact
`megabench history receipts` output (written by run_history.sh --bless and
reviewed by hand).

A winning nightly (W) carries a lane in which rmsnorm's fallback makes the step
5% slower (keep with lane evidence); a losing one gives rmsnorm's fused
cases its fallback's samples, so no pair wins by the minimum effect (drop).
rope wins in every nightly, in isolation only. A gap (X) leaves rmsnorm out.
A copied nightly is stored again as a copy and as a symlink (one run).

Usage: gen.py [OUTDIR]   (default: the folder of this script). Seeded.
"""
import copy
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("promotion", os.path.join(HERE, "..", "promotion", "gen.py"))
promotion = importlib.util.module_from_spec(spec)
spec.loader.exec_module(promotion)

DAY_S = 86400
SCENARIOS = {
    # the fallback catches up and stays caught up: demote, both receipts named
    "two_losing_nightlies": "WLL",
    # one bad night between two good ones: not flagged
    "one_losing_nightly": "WLW",
    # a nightly that left rmsnorm out says nothing about it: the losses on
    # either side of it are consecutive for the row, and flag it
    "losing_around_a_gap": "WLXL",
    # one losing nightly stored twice more (a copy and a symlink: the same
    # run_id) is still one losing nightly: not flagged
    "one_losing_nightly_copied": "WL",
    # the same two losses for a row whose status is drop already: nothing to
    # demote ("dropped")
    "already_dropped": ("WLL", "drop"),
}
# nightly-N files of a scenario that are also stored as a copy and a symlink
COPIED = {"one_losing_nightly_copied": 2}


def nightly(src, k, outcome, status="keep"):
    r = copy.deepcopy(src)
    prov = r["provenance"]
    prov["commit"] = "%040x" % (0xa11ce + k)
    prov["commit_time"] += k * DAY_S
    prov["describe"] = "nightly-%d" % (k + 1)
    r["run_id"] = "%032x" % (0xbee + k)
    day = "2025-01-%02d" % (2 + k)  # the night after the commit
    r["started_at"] = day + "T02:00:00Z"
    r["finished_at"] = day + "T02:10:00Z"
    r["catalog"] = promotion.catalog(rmsnorm=status)
    if outcome == "X":
        r["cases"] = [c for c in r["cases"] if c["row"] != "rmsnorm"]
        r["summary"]["cases"] = len(r["cases"])
        r["summary"]["ok"] = sum(c["status"] == "ok" for c in r["cases"])
    elif outcome == "W":
        r["lanes"] = [promotion.lane("rmsnorm", promotion.LANE_WIN, 10 + k)]
    else:
        fallback = {c["id"].replace("/fallback/", "/fused/"): c for c in r["cases"] if c["variant"] == "fallback"}
        for c in r["cases"]:
            if c["row"] == "rmsnorm" and c["variant"] == "fused":
                c["timing"] = copy.deepcopy(fallback[c["id"]]["timing"])
    return r


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    src = json.load(open(os.path.join(HERE, "..", "gate", "identical_code", "head.json")))
    for name, scenario in SCENARIOS.items():
        outcomes, status = scenario if isinstance(scenario, tuple) else (scenario, "keep")
        d = os.path.join(out, name, "receipts")
        os.makedirs(d, exist_ok=True)
        for k, outcome in enumerate(outcomes):
            with open(os.path.join(d, "nightly-%d.json" % (k + 1)), "w") as f:
                json.dump(nightly(src, k, outcome, status), f, indent=1)
                f.write("\n")
        if name in COPIED:
            k = COPIED[name]
            with open(os.path.join(d, "nightly-%d.json" % k)) as f, \
                    open(os.path.join(d, "nightly-%d-copy.json" % k), "w") as g:
                g.write(f.read())
            link = os.path.join(d, "nightly-%d-link.json" % k)
            if os.path.lexists(link):
                os.remove(link)
            os.symlink("nightly-%d.json" % k, link)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""scripts/bench server-ab's summary: per metric, the new build's median (the value), the old
build's median, every run's figure in run order, and the median of the paired differences
(new − old, pair by pair: the two runs of a pair are adjacent in time)."""
import json
import statistics
import sys

METRICS = ("server.cpu_pct_", "server.forward_loss_pct", "server.p99_forward_ms", "server.p50_forward_ms",
           "server.packets_forwarded_per_s", "roomload.cpu_pct", "host_busy_pct")


def main(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    runs = {}  # (metric, build) -> {pair: value}
    units, revs = {}, {}
    for r in rows:
        revs[r["build"]] = r["rev"]
        figures = [(r["metric"], r["value"], r["unit"])]
        if r["metric"] == "roomload.cpu_pct" and "host_busy_pct" in r:
            figures.append(("host_busy_pct", r["host_busy_pct"], "%"))
        for metric, value, unit in figures:
            if any(metric.startswith(m) for m in METRICS) and value is not None:
                runs.setdefault((metric, r["build"]), {})[r["pair"]] = value
                units[metric] = unit
    for metric in sorted({m for m, _ in runs}, key=lambda m: next(i for i, p in enumerate(METRICS) if m.startswith(p))):
        old, new = runs.get((metric, "old"), {}), runs.get((metric, "new"), {})
        if not old or not new:
            continue
        pairs = sorted(set(old) & set(new))
        line = {"bench": "server-ab", "metric": f"server-ab.{metric}", "value": round(statistics.median(new.values()), 3),
                "unit": units[metric], "old": round(statistics.median(old.values()), 3),
                "new_runs": [new[p] for p in sorted(new)], "old_runs": [old[p] for p in sorted(old)],
                "paired_diff_median": round(statistics.median(new[p] - old[p] for p in pairs), 3) if pairs else None,
                "pairs": len(pairs), "old_rev": revs.get("old"), "new_rev": revs.get("new")}
        srtp = next((r.get("srtp") for r in rows if "srtp" in r), None)
        if srtp:
            line["srtp"] = srtp
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])

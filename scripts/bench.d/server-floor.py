#!/usr/bin/env python3
"""scripts/bench server-floor's summary: per pair, roomserver's CPU at 500 participants against the
bare forwarder's (udpfloor.c) for the same datagrams, and the medians."""
import json
import statistics
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
server = {r["pair"]: r for r in rows if r["metric"] == "server.cpu_pct_500p"}
floor = {r["pair"]: r for r in rows if r["metric"] == "floor.cpu_pct_500p"}
ratios, gaps = [], []
for pair in sorted(set(server) & set(floor)):
    s, f = server[pair]["value"], floor[pair]["value"]
    ratios.append(s / f)
    gaps.append(s - f)
    print(json.dumps({"bench": "server-floor", "metric": "server_floor.server_over_floor", "value": round(s / f, 3),
                      "unit": "ratio", "pair": pair, "server_cpu_pct": s, "floor_cpu_pct": f}))
if ratios:
    print(json.dumps({"bench": "server-floor", "metric": "server_floor.floor_cpu_pct_500p",
                      "value": round(statistics.median(floor[p]["value"] for p in floor), 2), "unit": "% of one core",
                      "pairs": len(floor), "all": [floor[p]["value"] for p in sorted(floor)]}))
    print(json.dumps({"bench": "server-floor", "metric": "server_floor.server_cpu_pct_500p",
                      "value": round(statistics.median(server[p]["value"] for p in server), 2), "unit": "% of one core",
                      "pairs": len(server), "all": [server[p]["value"] for p in sorted(server)]}))
    print(json.dumps({"bench": "server-floor", "metric": "server_floor.server_over_floor_median",
                      "value": round(statistics.median(ratios), 3), "unit": "ratio",
                      "server_minus_floor_points": round(statistics.median(gaps), 2)}))

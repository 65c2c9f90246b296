#!/usr/bin/env python3
"""scripts/bench server-sweep's summary: per size and worker count, the server's CPU per 1000
participants (its % of one core over the window, all its threads, scaled), the p99 forward delay
and the forward loss, as JSON lines. One worker keeps the metric names it had before workers
existed; N workers add "_Nw"."""
import json
import sys


def main(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    for participants, workers in sorted({(r["participants"], r.get("workers", 1)) for r in rows}):
        of = [r for r in rows if r["participants"] == participants and r.get("workers", 1) == workers]
        suffix = "" if workers == 1 else f"_{workers}w"

        def value(prefix):
            return next((r["value"] for r in of if r.get("metric", "").startswith(prefix)), None)
        cpu = value("server.cpu_pct_")
        print(json.dumps({"bench": "server-sweep", "metric": f"server.cpu_pct_per_1000p_at_{participants}p{suffix}",
                          "value": None if cpu is None else round(cpu * 1000 / participants, 2), "unit": "% of a core",
                          "server_cpu_pct": cpu, "p99_forward_ms": value("server.p99_forward_ms"),
                          "forward_loss_pct": value("server.forward_loss_pct"),
                          "packets_forwarded_per_s": value("server.packets_forwarded_per_s"),
                          "roomload_cpu_pct": value("roomload.cpu_pct"), "host_busy_pct": next((r.get("host_busy_pct") for r in of if "host_busy_pct" in r), None),
                          "participants": participants, "workers": workers}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])

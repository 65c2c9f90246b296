#!/usr/bin/env python3
"""Analysis of scripts/bench soak: growth of memory and jitter-buffer delay over a long call.

Input: WORK/soak-{a,b,c}.jsonl (roomd --json status lines, one per sample) and
WORK/soak-procs.jsonl (roomserver's and roomproxy's RSS and CPU ticks). For each series, the
samples after the warm-up get a least-squares line; growth = slope x the span it covers, and
the residual spread beside it (a growth within the spread is no trend). Output: JSON lines in
the scripts/bench format.
Usage: soak.py WORK WARMUP_S MINUTES LOSS_PCT JITTER_MS"""
import json
import statistics
import sys


def emit(metric, value, unit, **extra):
    line = {"bench": "soak", "metric": metric, "value": round(float(value), 3), "unit": unit}
    line.update(extra)
    print(json.dumps(line), flush=True)


def fit(ts, ys):
    """Slope (per second), growth over the span, residual standard deviation."""
    n = len(ts)
    if n < 3:
        return 0.0, 0.0, 0.0
    mt, my = sum(ts) / n, sum(ys) / n
    sxx = sum((t - mt) ** 2 for t in ts)
    slope = sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / sxx if sxx > 0 else 0.0
    resid = [y - (my + slope * (t - mt)) for t, y in zip(ts, ys)]
    return slope, slope * (ts[-1] - ts[0]), statistics.pstdev(resid)


def status_lines(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "t" in d and "rss_mb" in d and not d.get("summary"):
                out.append(d)
    return out


def main():
    work, warmup, minutes, loss, jitter = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    setup = {"minutes": float(minutes), "loss_pct": float(loss), "jitter_ms": float(jitter), "warmup_s": warmup}
    rss, delay, per = [], [], {}
    xruns = 0
    cpu = []
    for v in "abc":
        lines = status_lines(f"{work}/soak-{v}.jsonl")
        if not lines:
            print(f"soak: no status lines from roomd {v}", file=sys.stderr)
            sys.exit(1)
        kept = [d for d in lines if d["t"] >= warmup] or lines
        ts = [d["t"] for d in kept]
        _, rss_growth, rss_spread = fit(ts, [d["rss_mb"] * 1024 for d in kept])
        jd = [d for d in kept if d.get("jitter_delay_ms") is not None]
        _, jd_growth, jd_spread = fit([d["t"] for d in jd], [d["jitter_delay_ms"] for d in jd])
        last = lines[-1]
        x = int(last.get("capture_xruns", 0)) + int(last.get("playback_xruns", 0))
        xruns += x
        cpu += [d["cpu_pct"] for d in kept if d.get("cpu_pct") is not None]
        per[v] = {"rss_growth_kb": round(rss_growth, 1), "rss_spread_kb": round(rss_spread, 1),
                  "rss_mb_first": kept[0]["rss_mb"], "rss_mb_last": kept[-1]["rss_mb"],
                  "jitter_delay_growth_ms": round(jd_growth, 2), "jitter_delay_spread_ms": round(jd_spread, 2),
                  "jitter_delay_ms_median": statistics.median([d["jitter_delay_ms"] for d in jd]) if jd else None,
                  "xruns": x, "received_lost": last.get("received_lost"), "packets": last.get("packets"),
                  "fec": last.get("fec"), "plc": last.get("plc"), "samples": len(kept), "span_s": round(ts[-1] - ts[0], 1)}
        rss.append(rss_growth)
        delay.append(jd_growth)

    procs = {}
    try:
        with open(f"{work}/soak-procs.jsonl") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        rows = []
    for name in ("server", "proxy"):
        r = [x for x in rows if x["proc"] == name and x["t"] >= warmup]
        if len(r) < 3:
            continue
        _, g, s = fit([x["t"] for x in r], [x["rss_kb"] for x in r])
        span = r[-1]["t"] - r[0]["t"]
        procs[name] = {"rss_growth_kb": round(g, 1), "rss_spread_kb": round(s, 1), "rss_kb_last": r[-1]["rss_kb"],
                       "cpu_pct": round(100 * (r[-1]["cpu_ticks"] - r[0]["cpu_ticks"]) / r[0]["hz"] / span, 2) if span > 0 else None}

    emit("soak.rss_growth_kb", max(rss), "kB", roomd=per, processes=procs, **setup,
         measure="least-squares line through each roomd's VmRSS after the warm-up, times the span; value: the largest of the three (spread: residual standard deviation)")
    emit("soak.jitter_delay_growth_ms", max(delay, key=abs), "ms", **setup,
         measure="least-squares line through each roomd's jitter_delay_ms (status line) after the warm-up, times the span; value: the largest in magnitude")
    emit("soak.xruns", xruns, "count", **setup)
    emit("soak.cpu_pct", statistics.mean(cpu) if cpu else -1, "%", **setup,
         measure="mean of the three roomd's cpu_pct status figures after the warm-up")


if __name__ == "__main__":
    main()

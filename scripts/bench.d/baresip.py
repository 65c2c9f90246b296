#!/usr/bin/env python3
"""scripts/bench baresip: CPU sampling during a call and the analysis of the legs.

    baresip.py cpu OUT SECONDS LABEL=PID...   CPU (utime+stime) and RSS of each PID over SECONDS
    baresip.py analyze WORK LEG...            metric lines for each leg directory WORK/LEG
    baresip.py pesq QUALITY_JSONL             baresip.pesq_wb from quality.py's line for its call

Mouth-to-ear is measured by scripts/bench_analysis.py's mouth_to_ear, the e2e bench's code
path (same mark train, same onset thresholds); standard library only."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench_analysis  # noqa: E402
from bench_analysis import emit, mouth_to_ear  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        # the command name (field 2) may hold spaces: split after its closing parenthesis
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


def proc_rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu(out, seconds, specs):
    procs = dict(s.split("=", 1) for s in specs)
    t0 = time.monotonic()
    first = {label: proc_ticks(pid) for label, pid in procs.items()}
    time.sleep(seconds)
    t1 = time.monotonic()
    result = {}
    for label, pid in procs.items():
        try:
            ticks, rss = proc_ticks(pid), proc_rss_kb(pid)
        except FileNotFoundError:
            sys.exit(f"bench baresip: {label} (pid {pid}) ended before the end of the CPU window")
        result[label] = {"cpu_pct": 100.0 * (ticks - first[label]) / CLK_TCK / (t1 - t0), "rss_mb": rss / 1024}
    result["window_s"] = t1 - t0
    with open(out, "w") as f:
        json.dump(result, f)


def status_fields(path, stream):
    fields = bench_analysis.status_fields(path, stream)
    if not fields:
        sys.exit(f"bench baresip: no {stream} stream in {path}")
    return fields


def analyze(work, legs):
    for leg in legs:
        d = os.path.join(work, leg)
        with open(os.path.join(d, "leg.json")) as f:
            meta = json.load(f)
        prog = meta.pop("program")  # "baresip" or "roomd"
        delays, sent = mouth_to_ear(os.path.join(work, "marks.wav"), os.path.join(d, "a.status"),
                                    os.path.join(d, "b-speaker.wav"), os.path.join(d, "b.status"),
                                    window_ms=meta.pop("window_ms"))
        sent = len(sent)
        if len(delays) < 5:
            sys.exit(f"bench baresip: {leg}: only {len(delays)} marks heard of {sent}")
        # A restarted stream (xrun) moves its samples against first_start_ns: say so with the figure.
        cap, play = status_fields(os.path.join(d, "a.status"), "capture"), status_fields(os.path.join(d, "b.status"), "playback")
        streams = {"a_capture": f"period {cap['period']} buffer {cap['buffer']} ch {cap['channels']} starts {cap['starts']} xruns {cap['xruns']}",
                   "b_playback": f"period {play['period']} buffer {play['buffer']} ch {play['channels']} starts {play['starts']} xruns {play['xruns']}"}
        emit("baresip", f"{prog}.mouth_to_ear_ms", delays[len(delays) // 2], "ms", board="sim", marks=len(delays), sent=sent,
             p10=round(delays[int(len(delays) * 0.1)], 2), p90=round(delays[int(len(delays) * 0.9)], 2),
             min=round(delays[0], 2), max=round(delays[-1], 2), **streams, **meta)
        with open(os.path.join(d, "cpu.json")) as f:
            use = json.load(f)
        window = f"{use.pop('window_s'):.1f} s of the call, /proc/PID/stat utime+stime; RSS: VmRSS at its end"
        for label, u in use.items():
            extra = {k: v for k, v in meta.items() if k in ("ptime", "config")}
            emit("baresip", f"{prog}.cpu_pct" if label in ("A", "B") else f"{label}.cpu_pct", u["cpu_pct"], "%",
                 side=label, window=window, **extra)
            emit("baresip", f"{prog}.rss_mb" if label in ("A", "B") else f"{label}.rss_mb", u["rss_mb"], "MB",
                 side=label, **extra)


def pesq(path):
    """quality.py analyze scored baresip's call (its run-0): the same line as baresip's metric."""
    with open(path) as f:
        q = next(json.loads(l) for l in f if l.startswith("{"))
    with open(os.path.join(os.path.dirname(path), "run-0", "leg.json")) as f:
        meta = json.load(f)
    if q["value"] < 0:
        sys.exit("bench baresip: no PESQ score (a voice was not heard at B)")
    emit("baresip", "baresip.pesq_wb", q["value"], "MOS-LQO", min=q["min"],
         voices=[{k: v[k] for k in ("voice", "pesq", "lag_ms", "playout_moves")} for v in q["voices"]],
         ptime=meta["ptime"], config=meta["config"], loss_pct=0,
         measure="PESQ-WB (P.862.2) of B's speaker vs A's clean input, the quality bench's voices and scoring "
                 "(scripts/bench.d/quality.py), echo path off, no loss; mean over the voices")


if __name__ == "__main__":
    if sys.argv[1] == "cpu":
        cpu(sys.argv[2], float(sys.argv[3]), sys.argv[4:])
    elif sys.argv[1] == "analyze":
        analyze(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "pesq":
        pesq(sys.argv[2])
    else:
        sys.exit(f"baresip.py: unknown command {sys.argv[1]}")

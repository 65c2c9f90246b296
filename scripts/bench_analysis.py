#!/usr/bin/env python3
"""Turns the raw output of scripts/bench runs (roomd --json lines, recorded WAVs) into metric
lines. Standard library only, so the bench needs nothing beyond python3."""
import array
import json
import math
import sys
import wave


def emit(bench, metric, value, unit, **extra):
    line = {"bench": bench, "metric": metric, "value": round(value, 3), "unit": unit}
    line.update(extra)
    print(json.dumps(line), flush=True)


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.startswith("{")]


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, path
        data = array.array("h", w.readframes(w.getnframes()))
        return w.getframerate(), data


def aec(work):
    status = [l for l in lines(f"{work}/echo.jsonl") if not l.get("summary")]
    base = next((l for l in status if l["far_end_periods"] >= 500), None)
    end = status[-1]
    if base is None or end["far_end_periods"] <= base["far_end_periods"]:
        sys.exit("bench aec: not enough far-end activity to measure ERLE")
    erle = 10 * math.log10((end["echo_in_energy"] - base["echo_in_energy"]) /
                           max(end["echo_out_energy"] - base["echo_out_energy"], 1e-20))
    first = status[0]
    early = next((l for l in status if l["far_end_periods"] >= 100), None)
    emit("aec", "aec.erle_db", erle, "dB", board="sim",
         window=f"far-end periods {base['far_end_periods']}..{end['far_end_periods']} (after 5 s of far-end speech)")
    if early:
        e0 = 10 * math.log10(early["echo_in_energy"] / max(early["echo_out_energy"], 1e-20))
        emit("aec", "aec.erle_first_1s_db", e0, "dB", board="sim")

    # Double talk: how much of the near-end talker survives when the far end talks at once.
    # The same near-end input is cleaned once with far-end speech and once without; the
    # double-talk output is projected on the near-end-only output over the near-end window.
    rate, dt = read_wav(f"{work}/dt.wav")
    _, alone = read_wav(f"{work}/nearonly.wav")
    with wave.open(f"{work}/near.wav", "rb") as w:
        near_len = w.getnframes()
    start, stop = 10 * rate, min(10 * rate + near_len, len(dt), len(alone))
    cross = sum(dt[i] * alone[i] for i in range(start, stop))
    e_alone = sum(alone[i] * alone[i] for i in range(start, stop))
    e_dt = sum(dt[i] * dt[i] for i in range(start, stop))
    if e_alone <= 0 or e_dt <= 0:
        sys.exit("bench aec: no near-end speech in the recordings")
    gain = cross / e_alone
    emit("aec", "aec.doubletalk_near_loss_db", -20 * math.log10(max(gain, 1e-6)), "dB", board="sim",
         measure="near-end speech level lost during double talk: -20log10(<dt,alone>/<alone,alone>) over the near-end talk")
    emit("aec", "aec.doubletalk_corr", cross / math.sqrt(e_alone * e_dt), "ratio", board="sim",
         measure="correlation of the double-talk output with the near-end-only output over the near-end talk")


def engine(work):
    all_lines = lines(f"{work}/engine.jsonl")
    summary = next((l for l in all_lines if l.get("summary")), None)
    if summary is None:
        sys.exit("bench engine: roomd printed no summary")
    if not summary["alloc_probe"]:
        sys.exit("bench engine: the allocation probe was not loaded")
    if summary["steady_periods"] < 500:
        sys.exit("bench engine: too few steady-state periods measured")
    emit("engine", "engine.allocs_per_frame", summary["steady_allocs"] / summary["steady_periods"], "allocs",
         board="sim", periods=summary["steady_periods"])
    emit("engine", "engine.cpu_pct", summary["cpu_pct"], "%", board="sim",
         config="48 kHz, 4 mics, beamformer, full APM, Opus 10 ms encode+decode (loopback), far-end playing")
    emit("engine", "roomd.rss_mb", summary["rss_mb"], "MB", board="sim")
    emit("engine", "engine.xruns", summary["capture_xruns"] + summary["playback_xruns"], "count", board="sim")


if __name__ == "__main__":
    {"aec": aec, "engine": engine}[sys.argv[1]](sys.argv[2])

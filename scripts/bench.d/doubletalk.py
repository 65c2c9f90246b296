#!/usr/bin/env python3
"""Analysis of `scripts/bench doubletalk` (see doubletalk.sh for the runs).

  doubletalk.py xruns ROOMDIR              total xruns and device losses of a room's four runs
  doubletalk.py analyze WORK LEAD ROOM...  metric lines, one JSON object per line

Per room (WORK/dt-ROOM): near-late.wav is the clean near-end talker as the mics hear it (LEAD
seconds of silence, then the talker); dt.wav / alone.wav are roomd's cleaned capture with and
without the far end; echo.wav the far end alone (full chain); erle.jsonl / echo.jsonl roomd's
status lines for ERLE (erle: the room's noise off; erle-room: on).
"""
import json
import math
import os
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_analysis import disturbances, echo_reduction, lines  # noqa: E402

RATE = 48000
FRAME = 480  # 10 ms
AUDIBLE_DBFS = -60.0


def emit(metric, value, unit, **extra):
    line = {"bench": "doubletalk", "metric": metric, "value": round(float(value), 3), "unit": unit}
    line.update(extra)
    print(json.dumps(line), flush=True)


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1 and w.getframerate() == RATE, path
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64) / 32768.0


def xruns(room_dir):
    return disturbances([f"{room_dir}/{run}.jsonl" for run in ("dt", "alone", "echo", "erle", "erle-room")])


_LOWPASS = None


def to16k(x):
    """48 kHz -> 16 kHz: windowed-sinc low-pass (cut-off 7.6 kHz, 241 taps, Kaiser) then every 3rd sample."""
    global _LOWPASS
    if _LOWPASS is None:
        n = np.arange(241) - 120
        h = np.sinc(2 * 7600 / RATE * n) * np.kaiser(241, 8.0)
        _LOWPASS = h / h.sum()
    return np.convolve(x, _LOWPASS, mode="same")[::3]


def lag_of(output, clean, max_lag=4800):
    """Delay of `output` behind `clean` (samples, 0..max_lag) by cross-correlation."""
    n = min(len(output), len(clean))
    size = 1 << int(math.ceil(math.log2(2 * n)))
    spec = np.fft.rfft(output[:n], size) * np.conj(np.fft.rfft(clean[:n], size))
    corr = np.fft.irfft(spec, size)[: max_lag + 1]
    return int(np.argmax(corr))


def frame_energy(x):
    n = len(x) // FRAME
    return (x[: n * FRAME].reshape(n, FRAME) ** 2).mean(axis=1)


def dbfs(energy):
    return 10 * math.log10(max(energy, 1e-20))


def pesq_wb(ref, deg):
    from pesq import pesq
    try:
        return float(pesq(16000, to16k(ref), to16k(deg), "wb"))
    except Exception as e:  # no utterance found, etc.: the talker is gone
        print(f"bench doubletalk: pesq failed: {e}", file=sys.stderr)
        return 1.0


def analyze_room(work, lead, name):
    d = f"{work}/dt-{name}"
    far, near, gain, *keys = open(f"{d}/room.txt").read().split()
    clean = read_wav(f"{d}/near-late.wav")
    dt, alone, echo = read_wav(f"{d}/dt.wav"), read_wav(f"{d}/alone.wav"), read_wav(f"{d}/echo.wav")
    lag = lag_of(alone, clean)
    # The talk: first to last sample of the clean talker above -50 dBFS, plus a margin.
    active = np.nonzero(np.abs(clean) > 10 ** (-50 / 20))[0]
    start = max(int(lead * RATE) - FRAME, active[0] - RATE // 10)
    stop = min(active[-1] + RATE // 5, len(clean), len(dt) - lag, len(alone) - lag)
    ref = clean[start:stop] * float(gain)
    seg_dt, seg_alone = dt[start + lag:stop + lag], alone[start + lag:stop + lag]

    pesq_dt = pesq_wb(ref, seg_dt)
    pesq_alone = pesq_wb(ref, seg_alone)
    cross, e_alone, e_dt = float(seg_dt @ seg_alone), float(seg_alone @ seg_alone), float(seg_dt @ seg_dt)
    loss = -20 * math.log10(max(cross / e_alone, 1e-6)) if e_alone > 0 else 120.0
    corr = cross / math.sqrt(e_alone * e_dt) if e_alone > 0 and e_dt > 0 else 0.0
    fa, fd = frame_energy(seg_alone), frame_energy(seg_dt)
    talking = fa > fa.max() * 1e-3
    chopped = 100.0 * float(np.mean(fd[talking] < fa[talking] / 10)) if talking.any() else 100.0

    erle, _, window = echo_reduction(f"{d}/erle.jsonl")
    erle_room, _, _ = echo_reduction(f"{d}/erle-room.jsonl")
    chain, _, _ = echo_reduction(f"{d}/echo.jsonl")
    # Residual echo: the echo-only output after 5 s, as the room would receive it.
    tail = echo[5 * RATE:]
    residual_rms = dbfs(float(np.mean(tail ** 2))) if len(tail) else -120.0
    w = len(tail) // (10 * FRAME)
    loudest = dbfs(float((tail[: w * 10 * FRAME].reshape(w, 10 * FRAME) ** 2).mean(axis=1).max())) if w else -120.0
    mic = [l for l in lines(f"{d}/dt.jsonl") if not l.get("summary")]
    return {
        "name": name, "far": far, "near": near, "keys": " ".join(keys) or "board/sim room.conf",
        "pesq": pesq_dt, "pesq_alone": pesq_alone, "loss": loss, "corr": corr, "chopped": chopped,
        "erle": erle, "erle_room": erle_room, "chain": chain, "residual": residual_rms, "loudest": loudest, "window": window,
        "talk_s": round((stop - start) / RATE, 2), "lag": lag,
        "xruns": xruns(d), "mic_dbfs_end": mic[-1]["mic_dbfs"] if mic else None,
    }


def analyze(work, lead, names):
    label = os.environ.get("DOUBLETALK_LABEL", "defaults")
    rooms = [analyze_room(work, lead, n) for n in names]
    for r in rooms:
        ctx = {"room": r["name"], "config": label}
        emit("aec.doubletalk_pesq", r["pesq"], "MOS-LQO", **ctx, pesq_talker_alone=round(r["pesq_alone"], 3),
             far=r["far"], near=r["near"], keys=r["keys"], talk_s=r["talk_s"], xruns=r["xruns"],
             measure="PESQ-WB of roomd's output during double talk vs the clean near-end talker, time-aligned, 16 kHz")
        emit("aec.doubletalk_near_loss_db", r["loss"], "dB", **ctx, corr=round(r["corr"], 3),
             chopped_pct=round(r["chopped"], 1),
             measure="-20log10(<dt,alone>/<alone,alone>) over the near-end talk; chopped_pct: talker frames >= 10 dB quieter in double talk")
        emit("aec.erle_db", r["erle"], "dB", **ctx, window=r["window"] + " (after 5 s of far-end speech)",
             measure="HPF + canceller; NS, AGC off; mic 0 vs output; the room's noise switched off (echo alone)")
        emit("aec.erle_room_db", r["erle_room"], "dB", **ctx,
             measure="the same with the room's noise on: capped near the echo-to-noise ratio unless the canceller also removes noise")
        emit("chain.echo_reduction_db", r["chain"], "dB", **ctx, measure="full chain, same far-end run")
        emit("aec.residual_echo_dbfs", r["residual"], "dBFS", **ctx, loudest_100ms_dbfs=round(r["loudest"], 1),
             audible=r["loudest"] > AUDIBLE_DBFS,
             measure=f"echo-only output after 5 s (full chain), RMS; audible when a 100 ms window exceeds {AUDIBLE_DBFS:.0f} dBFS")
    pesqs = [r["pesq"] for r in rooms]
    emit("aec.doubletalk_pesq", sum(pesqs) / len(pesqs), "MOS-LQO", room="all", config=label,
         min=round(min(pesqs), 3), worst_room=min(rooms, key=lambda r: r["pesq"])["name"], rooms=len(rooms),
         xruns=sum(r["xruns"] for r in rooms))
    emit("aec.doubletalk_near_loss_db", sum(r["loss"] for r in rooms) / len(rooms), "dB", room="all", config=label,
         max=round(max(r["loss"] for r in rooms), 3))
    emit("aec.erle_db", min(r["erle"] for r in rooms), "dB", room="min", config=label,
         mean=round(sum(r["erle"] for r in rooms) / len(rooms), 3))
    emit("aec.erle_room_db", min(r["erle_room"] for r in rooms), "dB", room="min", config=label,
         mean=round(sum(r["erle_room"] for r in rooms) / len(rooms), 3))
    emit("aec.residual_echo_dbfs", max(r["residual"] for r in rooms), "dBFS", room="max", config=label,
         loudest_100ms_dbfs=round(max(r["loudest"] for r in rooms), 1),
         audible=any(r["loudest"] > AUDIBLE_DBFS for r in rooms))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "xruns":
        print(xruns(sys.argv[2]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "analyze":
        analyze(sys.argv[2], float(sys.argv[3]), sys.argv[4:])
    else:
        sys.exit(__doc__)

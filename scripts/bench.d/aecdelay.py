#!/usr/bin/env python3
"""Double talk offline: the rooms of `scripts/bench doubletalk` without the sound card.

  aecdelay.py dt AECDELAY SPEECH_DIR WORK [ROOM[@DELAY_MS] ...]
  aecdelay.py first AECDELAY SPEECH_DIR WORK [ECHO_GAIN_DB ...]

AECDELAY is the harness built from scripts/bench.d/aecdelay.cpp (its `run` mode: roomd's
canceller, kalman_aec.h, NS on, 48 kHz); SPEECH_DIR holds the bench's espeak voices as float32
raw (dt_far_en_m.f32, …). Per room (optionally with its echo delay moved): the mic is built like
the sim card builds it (the same generated impulse response, echo gain, near-end gain, noise),
the canceller's delay is the room's + 15 ms (10 ms block + 5 ms playback headroom, as in roomd),
the talker starts at 6 s. Prints one bench line per room (aec.offline_doubletalk_pesq): PESQ-WB
of the output in double talk against the clean talker (doubletalk.py's alignment and segment),
and the loudest 100 ms of the echo-only output after 5 s.

`first`: the far end's first second (docs/echo-canceller.md, "The first second"). The far end
(the first 3 s of each far voice, FIRST_VOICES) starts after 1 s of silence, at every 0.5 ms of
a 10 ms block, in the sim's room (board/sim: 2 ms, the generated 150 ms response, −70 dBFS
noise) at each echo gain (default −10, −7, 0 dB); echo only. Prints one line per gain
(aec.offline_first_second_db): the loudest 20 ms of the output in the far end's first second, dB
against the far end's speech (its 20 ms frames within 30 dB of the loudest), worst and median
over the starts. AECDT_PARAMS (aecdelay.cpp) changes the
canceller's parameters for a run, AECDT_JOBS the parallel runs (2), AECDT_RATE its sample rate. No webrtc HPF/AGC after the canceller, so the numbers track the bench
but are not the bench's (they rank changes; the bench confirms them).
"""
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doubletalk as dtb  # noqa: E402

RATE = 48000
LEAD_S = 6
RUN_S = 21
HEADROOM_MS = 15  # roomd: the canceller's delay = 10 ms + 5 ms playback headroom + the room's

# name: far, near, near gain, room keys (doubletalk.sh's DT_ROOMS; board/sim's room.conf defaults)
ROOMS = {
    "dry2": ("dt_far_en_m", "dt_near_en_f", 1.0, dict(echo_delay_ms=2, ir="none", echo_gain_db=-6)),
    "sim": ("dt_far_de_m", "dt_near_en_m", 1.0, dict()),
    "rev120-loud": ("dt_far_en_f", "dt_near_de_m", 0.25, dict(echo_delay_ms=40, ir_length_ms=120, ir_rt60_ms=120, ir_drr_db=3, echo_gain_db=0)),
    "far80-rev360": ("dt_far_de_m", "dt_near_en_f", 1.0, dict(echo_delay_ms=80, ir_length_ms=360, ir_rt60_ms=360, ir_drr_db=0, ir_seed=7, noise_dbfs=-60)),
    "far80-dry-loud": ("dt_far_en_m", "dt_near_de_f", 0.35, dict(echo_delay_ms=80, ir="none", echo_gain_db=-2)),
}
DEFAULTS = dict(echo_delay_ms=2.0, echo_gain_db=-10, ir="generated", ir_length_ms=150, ir_rt60_ms=250, ir_drr_db=6, ir_seed=1, noise_dbfs=-70)

M64 = (1 << 64) - 1


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def gauss(r):
    s = float(r & 0xFFFF) + float((r >> 16) & 0xFFFF) + float((r >> 32) & 0xFFFF) + float(r >> 48)
    return (s / 65536.0 - 2.0) * 1.7320508


def impulse_response(k):
    if k["ir"] == "none":
        return np.ones(1)
    n = int(round(k["ir_length_ms"] * RATE / 1000))
    decay = np.log(1000.0) / (k["ir_rt60_ms"] / 1000.0)
    h = np.array([0.0] + [gauss(mix64((k["ir_seed"] << 32) ^ i)) for i in range(1, n)])
    h *= np.exp(-decay * np.arange(n) / RATE)
    h *= np.sqrt(10 ** (-k["ir_drr_db"] / 10) / float(h[1:] @ h[1:]))
    h[0] = 1.0
    return h


def read_f32(path):
    return np.fromfile(path, dtype="<f4").astype(np.float64)


def run(aecdelay, work, tag, far, mic):
    """The canceller on far/mic (48 kHz); AECDT_RATE=16000|32000 runs it at that rate (the
    signals resampled down, the output back up to 48 kHz for the analysis)."""
    fp, mp, op = (os.path.join(work, f"{tag}.{x}.f32") for x in ("far", "mic", "out"))
    rate = int(os.environ.get("AECDT_RATE", RATE))
    if rate != RATE:
        from scipy.signal import resample_poly
        far, mic = (resample_poly(x, rate // 1000, RATE // 1000) for x in (far, mic))
    far.astype("<f4").tofile(fp)
    mic.astype("<f4").tofile(mp)
    subprocess.run([aecdelay, "run", fp, mp, op], check=True)
    out = read_f32(op)
    if rate != RATE:
        out = resample_poly(out, RATE // 1000, rate // 1000)
    return out


def echo_of(far, k):
    """The mic's echo of `far` as the sim card makes it from room keys k: the room's impulse
    response and gain, behind the canceller's delay (the room's + HEADROOM_MS)."""
    n = len(far)
    d = int(round((k["echo_delay_ms"] + HEADROOM_MS) * RATE / 1000))
    echo = np.zeros(n)
    echo[d:] = np.convolve(far, impulse_response(k))[: n - d] * 10 ** (k["echo_gain_db"] / 20)
    return echo


def room(aecdelay, speech, work, name, delay_ms=None):
    far_v, near_v, gain, keys = ROOMS[name]
    k = dict(DEFAULTS, **keys)
    if delay_ms is not None:
        k["echo_delay_ms"] = delay_ms
    n = RUN_S * RATE
    far = np.zeros(n)
    f = read_f32(f"{speech}/{far_v}.f32")[:n]
    far[: len(f)] = f
    echo = echo_of(far, k)
    near = read_f32(f"{speech}/{near_v}.f32")
    clean = np.zeros(n)  # near-late.wav: the talker from LEAD_S
    clean[LEAD_S * RATE: LEAD_S * RATE + len(near)] = near[: n - LEAD_S * RATE]
    talk = np.zeros(n)
    talk[4:] = clean[:-4] * gain
    noise = np.random.default_rng(1).standard_normal(n) * 10 ** (k["noise_dbfs"] / 20)
    tag = f"{name}-{k['echo_delay_ms']}"
    out = run(aecdelay, work, tag, far, echo + talk + noise)
    out_echo = run(aecdelay, work, tag + "-echo", far, echo + noise)
    # doubletalk.py's alignment and segment
    lag = dtb.lag_of(out, clean)
    active = np.nonzero(np.abs(clean) > 10 ** (-50 / 20))[0]
    start = max(LEAD_S * RATE - dtb.FRAME, active[0] - RATE // 10)
    stop = min(active[-1] + RATE // 5, len(clean), len(out) - lag)
    pesq = dtb.pesq_wb(clean[start:stop] * gain, out[start + lag: stop + lag])
    tail = out_echo[5 * RATE:]
    w = len(tail) // (10 * dtb.FRAME)
    loudest = dtb.dbfs(float((tail[: w * 10 * dtb.FRAME].reshape(w, 10 * dtb.FRAME) ** 2).mean(axis=1).max()))
    return {"bench": "aecdelay", "metric": "aec.offline_doubletalk_pesq", "value": round(pesq, 3), "unit": "MOS-LQO",
            "room": name, "echo_delay_ms": k["echo_delay_ms"], "loudest_echo_only_100ms_dbfs": round(loudest, 1),
            "measure": "offline (kalman_aec.h alone, no sound card, no HPF/AGC): PESQ-WB of the talker in double talk"}


FIRST_VOICES = ("dt_far_en_m", "dt_far_en_f", "dt_far_de_m")
FIRST_STARTS_MS = [i / 2 for i in range(20)]


def first_start(aecdelay, speech, work, gain_db, voice, start_ms):
    """dB of the loudest 20 ms of the echo-only output in the far end's first second, against the
    far end's speech, for one voice starting start_ms into a block after 1 s of silence."""
    k = dict(DEFAULTS, echo_gain_db=gain_db)
    sp = read_f32(f"{speech}/{voice}.f32")[: 3 * RATE]
    s0 = RATE + int(round(start_ms * RATE / 1000))
    n = 4 * RATE + RATE // 10
    far = np.zeros(n)
    far[s0: s0 + len(sp)] = sp
    echo = echo_of(far, k)
    noise = np.random.default_rng(1).standard_normal(n) * 10 ** (k["noise_dbfs"] / 20)
    out = run(aecdelay, work, f"first-{gain_db}-{voice}-{start_ms}", far, echo + noise)
    F = 2 * dtb.FRAME   # 20 ms

    def powers(x):
        return (x[: len(x) // F * F].reshape(-1, F) ** 2).mean(axis=1)
    loudest = float(powers(out[s0: s0 + RATE]).max())
    p = powers(sp)
    return dtb.dbfs(loudest) - dtb.dbfs(float(p[p > p.max() * 1e-3].mean()))


def first(aecdelay, speech, work, gains):
    jobs = [(g, v, ms) for g in gains for v in FIRST_VOICES for ms in FIRST_STARTS_MS]
    with ThreadPoolExecutor(int(os.environ.get("AECDT_JOBS", "2"))) as ex:
        res = list(ex.map(lambda j: first_start(aecdelay, speech, work, *j), jobs))
    for g in gains:
        v = [r for j, r in zip(jobs, res) if j[0] == g]
        print(json.dumps({"bench": "aecdelay", "metric": "aec.offline_first_second_db", "value": round(max(v), 1), "unit": "dB",
                          "median": round(float(np.median(v)), 1), "echo_gain_db": g, "starts": len(v),
                          "measure": "offline (kalman_aec.h alone): the loudest 20 ms of the echo-only output in the far end's "
                                     "first second, dB against the far end's speech, worst of the starts (median beside it)"}), flush=True)


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "first":
        aecdelay, speech, work = sys.argv[2:5]
        os.makedirs(work, exist_ok=True)
        first(aecdelay, speech, work, [float(g) for g in sys.argv[5:]] or [-10.0, -7.0, 0.0])
        return
    if len(sys.argv) < 5 or sys.argv[1] != "dt":
        sys.exit(__doc__)
    aecdelay, speech, work = sys.argv[2:5]
    specs = sys.argv[5:] or list(ROOMS)
    jobs = []
    for s in specs:
        name, _, delay = s.partition("@")
        jobs.append((name, float(delay) if delay else None))
    os.makedirs(work, exist_ok=True)
    with ThreadPoolExecutor(int(os.environ.get("AECDT_JOBS", "2"))) as ex:
        for r in ex.map(lambda j: room(aecdelay, speech, work, *j), jobs):
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()

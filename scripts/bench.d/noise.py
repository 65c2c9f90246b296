#!/usr/bin/env python3
"""scripts/bench noise: inputs (prepare), the xruns of one noise's runs (xruns NOISEDIR) and
analysis (analyze). See noise.sh."""
import json
import math
import os
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from doubletalk import read_wav, to16k, lag_of, pesq_wb  # noqa: E402
from bench_analysis import disturbances  # noqa: E402

CHAINS = ("kalman", "webrtc", "off")


def xruns(noise_dir):
    return disturbances([f"{noise_dir}/{chain}.jsonl" for chain in CHAINS])

RATE = 48000
LEAD_S = 3.0
NOISES = {  # name: (spectrum slope in dB/octave, level: ("dbfs", x) or ("snr", x))
    "white": (0.0, ("dbfs", -45.0)),
    "pink": (-3.0, ("snr", 15.0)),
    "brown": (-6.0, ("snr", 10.0)),
}


def write_wav(path, x):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes((np.clip(x, -1, 1 - 2 ** -15) * 32767).astype("<i2").tobytes())


def coloured_noise(n, slope_db_per_octave, seed):
    rng = np.random.default_rng(seed)
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1 / RATE)
    f[0] = f[1]
    spec *= (f / 1000.0) ** (slope_db_per_octave / (20 * math.log10(2)))
    x = np.fft.irfft(spec, n)
    return x / np.sqrt(np.mean(x ** 2))


def rms_db(x):
    return 10 * math.log10(max(float(np.mean(x ** 2)), 1e-20))


def talk_mask(clean):
    """Frames (10 ms) where the clean talker is within 30 dB of its loudest frame."""
    f = 480
    n = len(clean) // f
    e = (clean[: n * f].reshape(n, f) ** 2).mean(axis=1)
    return e > e.max() * 1e-3, f


def prepare(work):
    talkers = [read_wav(f"{work}/ns_talker_f.wav"), read_wav(f"{work}/ns_talker_m.wav")]
    lead = np.zeros(int(LEAD_S * RATE))
    gap = np.zeros(RATE // 2)
    clean = np.concatenate([lead, talkers[0], gap, talkers[1], gap])
    clean *= 10 ** (-26 / 20) / np.sqrt(np.mean(clean[len(lead):] ** 2))   # talk at ~-26 dBFS RMS
    mask, f = talk_mask(clean)
    speech_db = 10 * math.log10(np.mean((clean[: len(mask) * f].reshape(-1, f) ** 2)[mask]))
    for seed, (name, (slope, (kind, value))) in enumerate(NOISES.items()):
        noise = coloured_noise(len(clean), slope, seed + 11)
        level = value if kind == "dbfs" else speech_db - value
        noise *= 10 ** (level / 20)
        write_wav(f"{work}/ns-{name}/input.wav", clean + noise)
        write_wav(f"{work}/ns-{name}/clean.wav", clean)
        with open(f"{work}/ns-{name}/levels.json", "w") as out:
            json.dump({"speech_dbfs": speech_db, "noise_dbfs": level}, out)


def emit(metric, value, unit, **extra):
    line = {"bench": "noise", "metric": metric, "value": round(float(value), 3), "unit": unit}
    line.update(extra)
    print(json.dumps(line), flush=True)


def analyze(work):
    for name in NOISES:
        d = f"{work}/ns-{name}"
        clean = read_wav(f"{d}/clean.wav")
        levels = json.load(open(f"{d}/levels.json"))
        snr_in = levels["speech_dbfs"] - levels["noise_dbfs"]
        for chain in CHAINS:
            disturbed = disturbances([f"{d}/{chain}.jsonl"])
            out = read_wav(f"{d}/{chain}.wav")
            lag = lag_of(out, clean)
            out = out[lag:]
            n = min(len(out), len(clean))
            ref, deg = clean[:n], out[:n]
            start = int(LEAD_S * RATE)
            mask, f = talk_mask(ref)
            frames = (deg[: len(mask) * f].reshape(-1, f) ** 2).mean(axis=1)
            speech_db = 10 * math.log10(max(frames[mask].mean(), 1e-20))
            noise_db = rms_db(deg[start - 2 * RATE: start])
            emit("ns.pesq", pesq_wb(ref[start:], deg[start:]), "MOS-LQO", noise=name, chain=chain,
                 snr_in_db=round(snr_in, 1), xruns=disturbed)
            emit("ns.snr_gain_db", (speech_db - noise_db) - snr_in, "dB", noise=name, chain=chain,
                 noise_out_dbfs=round(noise_db, 1), lag_ms=round(lag / 48, 1))


if __name__ == "__main__":
    if sys.argv[1] == "xruns":
        print(xruns(sys.argv[2]))
    else:
        {"prepare": prepare, "analyze": analyze}[sys.argv[1]](sys.argv[2])

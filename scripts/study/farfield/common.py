"""Shared helpers for the causal far-field front-end study (offline, 16 kHz, STFT 512/128).

Data: /tmp/loc/<room>/{mics,clean}.wav, room.scene, dry voices. Conventions from
/work/main/scripts/bench.d/farfield.py (imported read-only): to16k, stft/istft, scores.
"""
import math
import os
import sys
import wave

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "..", "bench.d"))
sys.path.insert(0, os.path.join(_HERE, "..", ".."))
import farfield as FF  # noqa: E402

LOC = os.environ.get("FARFIELD_STUDY_INPUT", "/tmp/loc")
CACHE = os.environ.get("FARFIELD_STUDY_CACHE", "/tmp/study/cache")
ROOMS = ["near-0.8m", "mid-1.6m", "far-2.4m", "far-3m", "turns", "walking", "doubletalk"]
FS = 16000
NFFT, HOP = FF.NFFT, FF.HOP
NB = NFFT // 2 + 1
C = FF.C
MICS = FF.MICS
FREQS = np.fft.rfftfreq(NFFT, 1 / FS)


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2
        rate = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64) / 32768.0
        return x.reshape(-1, w.getnchannels()), rate


def parse_scene(path):
    kv = {}
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        kv[k.strip()] = v.strip()
    talkers = []
    n = 1
    while f"talker{n}" in kv:
        t = {"file": kv[f"talker{n}"], "start": float(kv.get(f"talker{n}_start_s", 0))}
        if f"talker{n}_path" in kv:
            pts = []
            for item in kv[f"talker{n}_path"].split(";"):
                p, tt = item.split("@")
                pts.append((np.array([float(a) for a in p.split()]), float(tt)))
            t["path"] = pts
        else:
            t["at"] = np.array([float(a) for a in kv[f"talker{n}_at"].split()])
        talkers.append(t)
        n += 1
    return {"array": np.array([float(a) for a in kv["array"].split()]),
            "rt60": float(kv["rt60_ms"]) / 1000, "talkers": talkers, "kv": kv}


def position(t, time):
    """Talker position at scene time: piecewise linear along the path (as roomsim renders it)."""
    if "at" in t:
        return t["at"]
    pts = t["path"]
    if time <= pts[0][1]:
        return pts[0][0]
    for (p0, t0), (p1, t1) in zip(pts[:-1], pts[1:]):
        if time <= t1:
            f = (time - t0) / (t1 - t0)
            return p0 + f * (p1 - p0)
    return pts[-1][0]


def load(room):
    """Returns dict: mics (N,4), noise (N,4), ref (N,), refs list, span, scene, at 16 kHz (cached)."""
    os.makedirs(CACHE, exist_ok=True)
    cp = os.path.join(CACHE, room + ".npz")
    scene = parse_scene(os.path.join(LOC, room, "room.scene"))
    if os.path.exists(cp):
        z = np.load(cp)
        return {"mics": z["mics"], "noise": z["noise"], "ref": z["ref"], "refs": list(z["refs"]),
                "span": tuple(z["span"]), "scene": scene, "room": room}
    mics, r1 = read_wav(os.path.join(LOC, room, "mics.wav"))
    clean, r2 = read_wav(os.path.join(LOC, room, "clean.wav"))
    assert r1 == r2 == 48000
    total = len(mics)
    refs = []
    for t in scene["talkers"]:
        x, rate = read_wav(t["file"])
        assert rate == 48000
        x = x[:, 0]
        r = np.zeros(total)
        s = int(round(t["start"] * 48000))
        r[s:s + len(x)] = x[:max(0, total - s)]
        refs.append(r)
    ref = np.sum(refs, axis=0)
    mics16 = FF.to16k(mics)
    noise16 = FF.to16k(mics - clean)
    ref16 = FF.to16k(ref)
    refs16 = [FF.to16k(r) for r in refs]
    active = np.nonzero(np.abs(ref16) > 10 ** (-50 / 20))[0]
    span = (max(0, active[0] - 1600), min(len(ref16), active[-1] + 3200))
    np.savez(cp, mics=mics16, noise=noise16, ref=ref16, refs=np.array(refs16), span=np.array(span))
    return {"mics": mics16, "noise": noise16, "ref": ref16, "refs": refs16, "span": span, "scene": scene,
            "room": room}


def nframes(n):
    return 1 + (n - NFFT) // HOP


def stft(x):
    return FF.stft(x)


def istft(X, length):
    return FF.istft(X, length)


def frame_energy(sig, frames):
    idx = np.arange(NFFT)[None, :] + HOP * np.arange(frames)[:, None]
    return np.sum(sig[idx] ** 2, axis=1)


def active_talker(d, frames):
    """Per frame: index of the active talker from the dry signals' energy (as farfield.talker_steering:
    32-frame smoothed energy, argmax)."""
    if len(d["refs"]) == 1:
        return np.zeros(frames, dtype=int)
    en = [np.convolve(frame_energy(r, frames), np.ones(32) / 32, mode="same") for r in d["refs"]]
    return np.argmax(np.array(en), axis=0)


def source_positions(d, frames):
    """Per frame absolute position (frames, 3) of the talker to steer at."""
    who = active_talker(d, frames)
    pos = np.zeros((frames, 3))
    for t in range(frames):
        time = (t * HOP + NFFT / 2) / FS
        pos[t] = position(d["scene"]["talkers"][who[t]], time)
    return pos


def beam_steer(az_deg):
    """(bins, mics) relative to mic 0 for one of roomd's beams: a plane wave 20 deg up from az_deg."""
    az, el = np.radians(az_deg), np.radians(20.0)
    u = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
    tau = -(MICS @ u) / C
    tau = tau - tau[0]
    return np.exp(-2j * np.pi * FREQS[:, None] * tau[None, :])


def steer_vec(pos, array, near=True):
    """(bins, mics) relative to mic 0. near: spherical wave incl. 1/r gains; far: plane wave from the
    source's direction (azimuth and elevation as seen from the array centre)."""
    mics = array[None, :] + MICS
    if isinstance(near, str) and near.startswith("grid"):
        # roomd's beams: azimuth on a grid of `grid<deg>`
        step = float(near[4:])
        v = pos - array
        az = np.degrees(np.arctan2(v[1], v[0]))
        return beam_steer(np.round(az / step) * step)
    if near:
        dist = np.linalg.norm(mics - pos[None, :], axis=1)
        tau = (dist - dist[0]) / C
        g = dist[0] / dist
    else:
        u = (pos - array) / np.linalg.norm(pos - array)
        tau = -(MICS @ u) / C
        tau = tau - tau[0]
        g = np.ones(4)
    return np.exp(-2j * np.pi * FREQS[:, None] * tau[None, :]) * g[None, :]


def steering(d, frames, near=True):
    """(frames, bins, mics), recomputed only when the position changes."""
    pos = source_positions(d, frames)
    arr = d["scene"]["array"]
    out = np.empty((frames, NB, 4), dtype=complex)
    last = None
    for t in range(frames):
        if last is None or np.any(pos[t] != last):
            v = steer_vec(pos[t], arr, near)
            last = pos[t]
        out[t] = v
    return out


def noise_only_frames(d, frames, thr_db=-50.0, hang=0):
    """Oracle VAD: frames whose dry reference is silent (peak below thr dBFS in the frame)."""
    idx = np.arange(NFFT)[None, :] + HOP * np.arange(frames)[:, None]
    peak = np.max(np.abs(d["ref"][idx]), axis=1)
    quiet = peak < 10 ** (thr_db / 20)
    if hang:
        # not quiet within `hang` frames after speech (causal hangover): skip reverberant tail
        loud = ~quiet
        k = np.convolve(loud.astype(float), np.ones(hang + 1))[:frames] > 0
        quiet = ~k
    return quiet


def score(d, y):
    r, o, lag = FF.aligned(d["ref"], y, d["span"])
    p, s = FF.scores(r, o)
    return p, s, lag


MIC_DIST = np.linalg.norm(MICS[:, None, :] - MICS[None, :, :], axis=2)


def diffuse_coherence():
    """(bins, 4, 4) spherically diffuse coherence sinc(2 pi f d / c)."""
    return np.sinc(2 * FREQS[:, None, None] * MIC_DIST[None] / C)

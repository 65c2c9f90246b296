"""Evaluate causal front-end pipelines. A candidate is a '+'-separated chain of stages:
  multichannel pre-stage:  wpe:K:delay:alpha[:bins|all[:update_every[:obs|pred|geo]]]   online RLS-WPE on the 4 mics
                           wpem:K:delay:alpha[:bins|all[:obs|pred|geo]]   one single-channel RLS-WPE per mic
  beam (exactly one):      mic0 | das | sd:nf|ff|gridDEG:wngdB   (superdirective, diffuse coherence, WNG >= wngdB;
                                  gridDEG: steered as roomd's beams, a plane wave 20 deg up at the true
                                  azimuth rounded to DEG, e.g. grid15)
                           sdmu:nf|ff:mu                  (superdirective, fixed loading mu)
                           sdlog:STATUS.jsonl:wngdB[:lag_s]  (superdirective, steered as a roomd run steered: its
                                  status lines' beam_azimuth_deg, mic 0 before the first lock; from
                                  FARFIELD_KEEP's roomd.jsonl)
                           omvdr:load:tau_s[:hang_frames[:eye|gam[:nf|ff[:every[:wng_dB]]]]]  (online noise cov, oracle VAD;
                                  weights recomputed every `every` frames; wng_dB: WNG floor by blending
                                  toward the superdirective beam with the same floor)
  single-channel post:     wpe1:K:delay:alpha[:obs|pred|geo[:bins|all[:update_every]]]  (RLS-WPE on the beam output)
                           wpe1r:K:delay:alpha[:power[:fade_frames[:own]]]  (RLS-WPE on the beam, its past seen through
                                  the beam of now, W(t)^H X(t-d), after a sd/sdlog beam; fade_frames: its
                                  subtraction fades in again after each turn, as roomd's; own: the past beam outputs)
                           lr:rt60|true:Tl:gmin_dB[:kappa]   Lebart late-reverb suppression
                           lrn:rt60|true:Tl:gmin_dB[:kappa]  same + oracle-VAD noise PSD of the beam output
                           lrm:rt60|true:Tl:gmin_dB[:kappa]  same + blind minimum-statistics noise PSD
                           ns:gmin_dB                     Wiener noise suppression, oracle-VAD noise PSD
                           mcc:gmin_dB | zel:gmin_dB      McCowan / Zelinski post-filter on the (pre-stage) mics
Usage: [PERTURB=gain_db:selfnoise_db] nice -n 10 python3 run.py [--rooms=a,b] CAND [CAND...]   -> results/cands.json (merged), out/<room>/<cand>.npy
"""
import json, os, sys, time, fcntl
import numpy as np
from common import *
import fe
os.chdir(os.path.dirname(os.path.abspath(__file__)))  # results/, out/, logs/ beside the scripts

_cache = {}


def X_of(d):
    k = ("X", d["room"])
    if k not in _cache:
        _cache[k] = stft(d["mics"])
    return _cache[k]


def steer_of(d, near=True):
    k = ("S", d["room"], near)
    if k not in _cache:
        _cache[k] = steering(d, X_of(d).shape[0], near)
    return _cache[k]


def quiet_of(d, hang=0):
    return noise_only_frames(d, X_of(d).shape[0], hang=hang)


def wpe_of(d, K, delay, alpha, bins=None, upd=1, power="obs"):
    tag = f"wpe_{d['room']}_{K}_{delay}_{alpha}_{bins}_{upd}" + ("" if power == "obs" else "_" + power) + ".npy"
    p = os.path.join(CACHE, tag)
    if os.path.exists(p):
        return np.load(p).astype(complex), None
    t0 = time.process_time()
    Z = fe.online_wpe(X_of(d), taps=K, delay=delay, alpha=alpha, bins=bins, update_every=upd, power=power)
    cpu = time.process_time() - t0
    np.save(p, Z.astype(np.complex64))
    return Z, cpu


def run(d, cand):
    stages = cand.split("+")
    Wbeam = None   # the beam's weights per frame, for wpe1r
    X = X_of(d)
    T = X.shape[0]
    info = {}
    i = 0
    if stages[0].startswith("wpe:"):
        a = stages[0].split(":")[1:]
        K, dl, al = int(a[0]), int(a[1]), float(a[2])
        bins = int(a[3]) if len(a) > 3 and a[3] != "all" else None
        upd = int(a[4]) if len(a) > 4 else 1
        pw = a[5] if len(a) > 5 else "obs"
        X, cpu = wpe_of(d, K, dl, al, bins, upd, pw)
        info["wpe_cpu_s"] = cpu
        i = 1
    elif stages[0].startswith("wpem:"):   # one single-channel WPE per mic, before the beam
        a = stages[0].split(":")[1:]
        K, dl, al = int(a[0]), int(a[1]), float(a[2])
        bins = int(a[3]) if len(a) > 3 and a[3] != "all" else None
        pw = a[4] if len(a) > 4 else "obs"
        X = np.stack([fe.online_wpe(X[:, :, m:m + 1], taps=K, delay=dl, alpha=al, bins=bins, power=pw)[:, :, 0]
                      for m in range(X.shape[2])], axis=2)
        i = 1
    b = stages[i].split(":")
    kind = b[0]
    if kind == "mic0":
        Y = X[:, :, 0]
    elif kind == "das":
        Y = fe.apply_w(fe.w_das(steer_of(d)), X)
    elif kind in ("sd", "sdmu"):
        near = b[1] if b[1].startswith("grid") else b[1] == "nf"
        S = steer_of(d, near)
        W = fe.w_superdirective(S, wng_min_db=float(b[2])) if kind == "sd" else fe.w_superdirective(S, mu=float(b[2]))
        info["wng_db_min"] = float(np.min(fe.wng_db(W, S)))
        Y = fe.apply_w(W, X)
        Wbeam = W
    elif kind == "sdlog":   # steered as a roomd run steered: its status lines' beam_azimuth_deg (mic 0 before a lock)
        rows = [json.loads(l) for l in open(b[1])]
        lag = float(b[3]) if len(b) > 3 else 0.0
        times = np.array([r["t"] for r in rows])
        azs = [r.get("beam_azimuth_deg") for r in rows]
        T = X.shape[0]
        S = np.ones((T, NB, 4), dtype=complex)   # mic 0's frames: any steering, replaced below
        mic0 = np.zeros(T, dtype=bool)
        for t in range(T):
            now = (t * HOP + NFFT / 2) / FS + lag
            j = np.searchsorted(times, now)   # the first line at or after now: the direction chosen by then
            az = azs[j] if j < len(azs) else azs[-1]
            if az is None:
                mic0[t] = True
            else:
                S[t] = beam_steer(az)
        W = fe.w_superdirective(S, wng_min_db=float(b[2]))
        W[mic0] = 0
        W[mic0, :, 0] = 1
        Wbeam = W
        Y = fe.apply_w(W, X)
    elif kind == "omvdr":
        load, tau = float(b[1]), float(b[2])
        hang = int(b[3]) if len(b) > 3 else 0
        lk = b[4] if len(b) > 4 else "eye"
        near = not (len(b) > 5 and b[5] == "ff")
        every = int(b[6]) if len(b) > 6 else 1
        wng = float(b[7]) if len(b) > 7 else None
        S = steer_of(d, near)
        Wf = fe.w_superdirective(S, wng_min_db=wng) if wng is not None else None
        Y = fe.online_mvdr(X, S, quiet_of(d, hang), tau_s=tau, load=load, load_kind=lk, every=every,
                           wng_min_db=wng, w_fallback=Wf)
    else:
        raise ValueError(kind)
    for st in stages[i + 1:]:
        a = st.split(":")
        if a[0] == "wpe1r":   # the beam's WPE, its past seen through the beam of now
            if Wbeam is None:
                raise ValueError("wpe1r follows an sd or sdlog beam")
            Y = fe.online_wpe_beam(X, Wbeam, taps=int(a[1]), delay=int(a[2]), alpha=float(a[3]),
                                   power=a[4] if len(a) > 4 else "geo", fade=int(a[5]) if len(a) > 5 else 0,
                                   own_past=len(a) > 6 and a[6] == "own")
        elif a[0] == "wpe1":
            Y = fe.online_wpe(Y[:, :, None], taps=int(a[1]), delay=int(a[2]), alpha=float(a[3]),
                              power=a[4] if len(a) > 4 else "obs",
                              bins=int(a[5]) if len(a) > 5 and a[5] != "all" else None,
                              update_every=int(a[6]) if len(a) > 6 else 1)[:, :, 0]
        elif a[0] in ("lr", "lrn", "lrm"):
            rt = d["scene"]["rt60"] if a[1] == "true" else float(a[1])
            kappa = float(a[4]) if len(a) > 4 else 1.0
            npsd = None
            if a[0] == "lrn":
                npsd = fe.recursive_noise_psd(Y, quiet_of(d))
            elif a[0] == "lrm":
                npsd = fe.minstat_noise_psd(Y)
            G = fe.late_reverb_gain(Y, rt, Tl=float(a[2]), noise_psd=npsd, gmin_db=float(a[3]), kappa=kappa)
            Y = Y * G
        elif a[0] == "ns":
            npsd = fe.recursive_noise_psd(Y, quiet_of(d))
            G = fe.late_reverb_gain(Y, 1.0, Tl=0.05, noise_psd=npsd, gmin_db=float(a[1]), kappa=0.0)
            Y = Y * G
        elif a[0] in ("mcc", "zel"):
            G = fe.mccowan_gain(X, steer_of(d), gmin_db=float(a[1]), zelinski=a[0] == "zel")
            Y = Y * G
        else:
            raise ValueError(a[0])
    return istft(Y, len(d["mics"])), info


PERTURB = os.environ.get("PERTURB")  # "gain_db:selfnoise_db", e.g. "1:-30" -> results/perturb_<..>.json


def perturb(d):
    """Robustness check: per-mic gain error uniform in +-gain_db, and independent white self-noise at
    selfnoise_db re mic 0's mean power over the talk span. Seeded per room."""
    gdb, ndb = (float(v) for v in PERTURB.split(":"))
    rng = np.random.default_rng(sum(map(ord, d["room"])))
    g = 10 ** (rng.uniform(-gdb, gdb, 4) / 20)
    a, b = d["span"]
    p0 = np.mean(d["mics"][a:b, 0] ** 2)
    d = dict(d)
    d["mics"] = d["mics"] * g[None, :] + rng.standard_normal(d["mics"].shape) * np.sqrt(p0 * 10 ** (ndb / 10))
    d["room"] = d["room"] + "@p" + PERTURB.replace(":", "_")   # separate caches
    return d


def main(cands, rooms=ROOMS):
    os.makedirs("results", exist_ok=True)
    out_json = "results/cands.json" if not PERTURB else f"results/perturb_{PERTURB.replace(':', '_')}.json"
    new = {}
    for cand in cands:
        new[cand] = {}
        for room in rooms:
            d = load(room)
            if PERTURB:
                d = perturb(d)
            t0 = time.process_time()
            y, info = run(d, cand)
            cpu = time.process_time() - t0
            os.makedirs(f"out/{d['room']}", exist_ok=True)
            np.save(f"out/{d['room']}/{cand.replace(':', '_').replace('+', '__').replace('/', '_')}.npy", y.astype(np.float32))
            p, s, lag = score(d, y)
            new[cand][room] = {"pesq": p, "stoi": s, "lag": lag, "cpu_s": cpu, **info}
            print(f"{cand:45} {room:11} PESQ {p:.2f} STOI {s:.3f} lag {lag:4d} cpu {cpu:.1f}s {info}", flush=True)
        m = np.mean([new[cand][r]["pesq"] for r in rooms]), np.mean([new[cand][r]["stoi"] for r in rooms])
        print(f"{cand:45} {'MEAN':11} PESQ {m[0]:.2f} STOI {m[1]:.3f}", flush=True)
        # merge into results/cands.json under a lock
        with open("results/.lock", "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            path = out_json
            allr = json.load(open(path)) if os.path.exists(path) else {}
            allr.setdefault(cand, {}).update(new[cand])
            json.dump(allr, open(path, "w"), indent=1)


if __name__ == "__main__":
    args = sys.argv[1:]
    rooms = ROOMS
    if args and args[0].startswith("--rooms="):
        rooms = args[0].split("=", 1)[1].split(",")
        args = args[1:]
    main(args, rooms)

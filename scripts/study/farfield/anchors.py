"""mic0 and the offline anchors (farfield.anchors: DAS, MVDR with the true noise covariance, WPE(10,3,3 it)+MVDR),
noise = mics - clean. Writes out/<room>/<label>.npy and results/anchors.json.
Run: nice -n 10 python3 anchors.py"""
import os
import json, os, sys, time, wave
import numpy as np
from common import *
os.chdir(os.path.dirname(os.path.abspath(__file__)))  # results/, out/, logs/ beside the scripts

res = {}
for room in ROOMS:
    d = load(room)
    spec = dict(FF.ROOMS[room])
    spec["_seconds"] = []
    for t in d["scene"]["talkers"]:
        with wave.open(t["file"]) as w:
            spec["_seconds"].append(w.getnframes() / w.getframerate())
    # geometry check: scene vs farfield.place
    for i, (voice, az, dist, h, start) in enumerate(spec["talkers"]):
        if "walk" not in spec:
            p = np.array(FF.place(spec, az, dist, h))
            assert np.allclose(p, d["scene"]["talkers"][i]["at"], atol=2e-3), (room, p)
    t0 = time.process_time()
    outs = FF.anchors(spec, d["mics"], d["noise"], d["refs"])
    cpu = time.process_time() - t0
    os.makedirs(f"out/{room}", exist_ok=True)
    r = {}
    sig = {"mic0": d["mics"][:, 0], **{"A_" + k: v for k, v in outs.items()}}
    for k, v in sig.items():
        np.save(f"out/{room}/{k}.npy", v.astype(np.float32))
        p, s, lag = score(d, v)
        r[k] = [p, s, lag]
        print(f"{room:11} {k:12} PESQ {p:.2f} STOI {s:.3f} lag {lag}", flush=True)
    r["_cpu_s"] = cpu
    res[room] = r
os.makedirs("results", exist_ok=True)
json.dump(res, open("results/anchors.json", "w"), indent=1)

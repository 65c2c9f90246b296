"""Print the rooms x candidates table (PESQ/STOI) with the three pass criteria.
Usage: python3 table.py [--md] [--file=results/perturb_1_-30.json] [substring filters...]
(mic0 and anchor rows always come from the unperturbed runs; with --file the candidate's own mic0 row is shown as "mic0 (file)")"""
import json, sys
import numpy as np
from common import ROOMS
A = json.load(open("results/anchors.json"))
md = "--md" in sys.argv
src = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--file=")), "results/cands.json")
C = json.load(open(src))
filt = [a for a in sys.argv[1:] if a != "--md" and not a.startswith("--file=")]
rows = {}
for k in ["mic0", "A_das", "A_mvdr", "A_wpe_mvdr"]:
    rows["anchor " + k if k != "mic0" else "mic0"] = {r: (A[r][k][0], A[r][k][1]) for r in ROOMS}
for k, v in C.items():
    if k == "mic0":
        if src != "results/cands.json":
            rows["mic0 (file)"] = {r: (v[r]["pesq"], v[r]["stoi"]) for r in ROOMS}
        continue
    if filt and not any(f in k for f in filt):
        continue
    if all(r in v for r in ROOMS):
        rows[k] = {r: (v[r]["pesq"], v[r]["stoi"]) for r in ROOMS}
mv = rows["anchor A_mvdr"]; m0 = rows["mic0"]
thr_p = np.mean([rows["anchor A_wpe_mvdr"][r][0] for r in ROOMS]) - 0.3
short = {"near-0.8m": "near", "mid-1.6m": "mid", "far-2.4m": "far2.4", "far-3m": "far3", "turns": "turns", "walking": "walk", "doubletalk": "dtalk"}
if md:
    print("| candidate | " + " | ".join(short[r] for r in ROOMS) + " | mean | C1 | C2 | C3 |")
    print("|---" * (len(ROOMS) + 5) + "|")
else:
    print(f"{'candidate':44}" + "".join(f"{short[r]:>11}" for r in ROOMS) + f"{'mean':>11}  C1 C2 C3")
for k, v in rows.items():
    mp = np.mean([v[r][0] for r in ROOMS]); ms = np.mean([v[r][1] for r in ROOMS])
    c1 = all(v[r][1] >= mv[r][1] - 1e-9 for r in ROOMS)
    c2 = all(v[r][1] >= m0[r][1] + 0.08 for r in ROOMS if m0[r][1] < 0.85)
    c3 = mp >= thr_p
    f = lambda b: "Y" if b else "-"
    if md:
        print(f"| {k} | " + " | ".join(f"{v[r][0]:.2f} / {v[r][1]:.3f}" for r in ROOMS) + f" | {mp:.2f} / {ms:.3f} | {f(c1)} | {f(c2)} | {f(c3)} |")
    else:
        print(f"{k:44}" + "".join(f"{v[r][0]:5.2f}/{v[r][1]:.3f}" for r in ROOMS) + f"{mp:5.2f}/{ms:.3f}   {f(c1)}  {f(c2)}  {f(c3)}")
print(f"C1: STOI >= offline MVDR anchor in every room; C2: STOI >= mic0+0.08 where mic0 < 0.85; C3: mean PESQ >= {thr_p:.3f} (WPE+MVDR anchor mean - 0.3)")

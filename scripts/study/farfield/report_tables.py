"""Markdown tables for REPORT.md from results/*.json (and cost.py). Run: python3 report_tables.py > tables.md
Also writes RESULTS_ALL.md (every candidate run on all rooms)."""
import json, re
import numpy as np
from common import ROOMS
import cost

A = json.load(open("results/anchors.json"))
C = json.load(open("results/cands.json"))
SH = {"near-0.8m": "near-0.8m", "mid-1.6m": "mid-1.6m", "far-2.4m": "far-2.4m", "far-3m": "far-3m",
      "turns": "turns", "walking": "walking", "doubletalk": "dtalk"}
mv = {r: A[r]["A_mvdr"][1] for r in ROOMS}
m0 = {r: A[r]["mic0"][1] for r in ROOMS}
THR = np.mean([A[r]["A_wpe_mvdr"][0] for r in ROOMS]) - 0.3

B = "omvdr:0.01:1.0:0:gam"
B4 = "omvdr:0.01:1.0:0:gam:nf:4"
W1 = "wpe1:6:3:0.995:geo:128:2"
MAIN = [
    ("1", "mic 0 (baseline)", "A:mic0"),
    ("1", "offline DAS anchor", "A:A_das"),
    ("1", "offline MVDR anchor (true noise cov)", "A:A_mvdr"),
    ("1", "offline WPE(10,3,3 it)+MVDR anchor", "A:A_wpe_mvdr"),
    ("2", "DAS (causal STFT)", "das"),
    ("3", "superdirective, WNG>=-10 dB, near-field", "sd:nf:-10"),
    ("3", "superdirective, WNG>=-10 dB, far-field", "sd:ff:-10"),
    ("3", "superdirective, WNG>=0 dB, near-field", "sd:nf:0"),
    ("3", "superdirective, WNG>=0 dB, far-field", "sd:ff:0"),
    ("4", "online MVDR, load 1e-2*I", "omvdr:0.01:1.0"),
    ("4", "online MVDR, load 1e-1*I", "omvdr:0.1:1.0"),
    ("4", "online MVDR, load 1e-3*I", "omvdr:0.001:1.0"),
    ("4", "online MVDR, load 1e-2*(Gamma+0.01I)", B),
    ("4", "  same, weights every 4th frame", B4),
    ("4", "  same + WNG floor -10 dB (blend to 3)", B4 + ":-10"),
    ("4", "online MVDR, 200 ms hangover after speech", "omvdr:0.001:1.0:25"),
    ("5", "MC online WPE(10,3,.995)+superdirective", "wpe:10:3:0.995+sd:nf:-10"),
    ("5", "MC online WPE(10,3,.995)+online MVDR", "wpe:10:3:0.995+" + B),
    ("5", "MC online WPE(10,3,.995,geo-power)+online MVDR", "wpe:10:3:0.995:all:1:geo+" + B),
    ("5", "MC online WPE(6,3,.998)+online MVDR", "wpe:6:3:0.998+" + B),
    ("5'", "online MVDR + 1-ch WPE(10,3,.995) on beam", B + "+wpe1:10:3:0.995"),
    ("5'", "online MVDR + 1-ch WPE(16,3,.995)", B + "+wpe1:16:3:0.995"),
    ("6", "online MVDR + Lebart (true RT60, Tl 50 ms, -12 dB)", B + "+lr:true:0.05:-12"),
    ("6", "online MVDR + Lebart (RT60 0.5 s)", B + "+lr:0.5:0.05:-12"),
    ("6", "online MVDR + Lebart (RT60 0.5 s, kappa 0.5)", B + "+lr:0.5:0.05:-12:0.5"),
    ("6", "online MVDR + Lebart + noise PSD (true RT60)", B + "+lrn:true:0.05:-12"),
    ("6", "superdirective + Lebart (true RT60)", "sd:nf:-10+lr:true:0.05:-12"),
    ("6", "superdirective + Lebart (0.5 s, kappa 0.5)", "sd:nf:-10+lr:0.5:0.05:-12:0.5"),
    ("7", "online MVDR + Wiener NS (oracle noise PSD)", B + "+ns:-12"),
    ("7", "online MVDR + McCowan", B + "+mcc:-12"),
    ("7", "online MVDR + Zelinski", B + "+zel:-12"),
    ("7", "online MVDR + Zelinski + Lebart(true, k .5)", B + "+zel:-12+lr:true:0.05:-12:0.5"),
    ("7", "online MVDR/4 + Zelinski + Lebart(0.5 s, k .5)", B4 + "+zel:-12+lr:0.5:0.05:-12:0.5"),
    ("7", "online MVDR/4 + 1-ch WPE(6,<4k,/2) + Zelinski + Lebart(true)", B4 + "+" + W1 + "+zel:-12+lr:true:0.05:-12:0.5"),
    ("7", "superdirective + 1-ch WPE(6,<4k,/2) + Lebart(0.5 s, k .5)", "sd:nf:-10+" + W1 + "+lr:0.5:0.05:-12:0.5"),
    ("7", "superdirective + 1-ch WPE(6,<4k,/2) + Zelinski + Lebart(0.5, k .5)", "sd:nf:-10+" + W1 + "+zel:-12+lr:0.5:0.05:-12:0.5"),
    ("7", "superdirective + Zelinski + Lebart(0.5 s, k .5)", "sd:nf:-10+zel:-12+lr:0.5:0.05:-12:0.5"),
    ("5+6", "MC WPE(10,3,.995,geo)+online MVDR+Lebart(true,k .5)", "wpe:10:3:0.995:all:1:geo+" + B + "+lr:true:0.05:-12:0.5"),
    ("5+6", "MC WPE(6,3,.995,geo,<4 kHz,/2)+online MVDR+Lebart(true,k .5)", "wpe:6:3:0.995:128:2:geo+" + B + "+lr:true:0.05:-12:0.5"),
    ("5+7", "MC WPE(6,3,.995,geo,<4 kHz,/2)+online MVDR+Zelinski+Lebart", "wpe:6:3:0.995:128:2:geo+" + B + "+zel:-12+lr:true:0.05:-12:0.5"),
]


def vals(key, src=C):
    if key.startswith("A:"):
        k = key[2:]
        return {r: (A[r][k][0], A[r][k][1]) for r in ROOMS}
    return {r: (src[key][r]["pesq"], src[key][r]["stoi"]) for r in ROOMS}


def crit(v):
    c1 = all(v[r][1] >= mv[r] - 1e-9 for r in ROOMS)
    c2 = all(v[r][1] >= m0[r] + 0.08 for r in ROOMS if m0[r] < 0.85)
    c3 = np.mean([v[r][0] for r in ROOMS]) >= THR
    return c1, c2, c3


def mflops(key):
    if key.startswith("A:"):
        return "offline" if key != "A:mic0" else "0"
    return f"{cost.row(key)[3] / 1e6:.1f}"


def table(rows, src=C, with_cost=True, ids=True):
    out = ["| # | candidate (spec) | " + " | ".join(SH[r] for r in ROOMS) + " | **mean** | C1 | C2 | C3 |" + (" Mflop/s |" if with_cost else "")]
    out.append("|---" * (len(ROOMS) + 6 + (1 if with_cost else 0)) + "|")
    for cid, label, key in rows:
        if not key.startswith("A:") and key not in src:
            continue
        v = vals(key, src)
        mp, ms = np.mean([v[r][0] for r in ROOMS]), np.mean([v[r][1] for r in ROOMS])
        c = ["Y" if x else "-" for x in crit(v)] if not key.startswith("A:") else ["", "", ""]
        name = (f"{label}<br>`{key}`" if label != key else f"`{key}`") if not key.startswith("A:") else label
        out.append(f"| {cid} | {name} | " + " | ".join(f"{v[r][0]:.2f} / {v[r][1]:.3f}" for r in ROOMS)
                   + f" | **{mp:.2f} / {ms:.3f}** | " + " | ".join(c) + " |" + (f" {mflops(key)} |" if with_cost else ""))
    return "\n".join(out)


if __name__ == "__main__":
    print("## Main table (PESQ-WB / STOI)\n")
    print(table(MAIN))
    print(f"\nC1: STOI >= offline MVDR anchor in every room. C2: STOI >= mic0 + 0.08 in every room where mic0 < 0.85. "
          f"C3: mean PESQ >= {THR:.3f} (WPE+MVDR anchor mean {THR + 0.3:.3f} - 0.3).\n")
    # all
    allrows = [("", k, k) for k in C if all(r in C[k] for r in ROOMS)]
    with open("RESULTS_ALL.md", "w") as f:
        f.write("# Every candidate run on all 7 rooms (PESQ-WB / STOI), from results/cands.json\n\n"
                "Produced by `python3 report_tables.py` (scores from `nice -n 10 python3 run.py CAND...`).\n\n")
        f.write(table([("1", "mic0", "A:mic0"), ("1", "anchor DAS", "A:A_das"), ("1", "anchor MVDR", "A:A_mvdr"),
                       ("1", "anchor WPE+MVDR", "A:A_wpe_mvdr")] + allrows))
        f.write(f"\n\nC1/C2/C3 as in REPORT.md (C3 threshold {THR:.3f}).\n")
    # the online-WPE parameter grid (3 rooms), from logs/wpegrid.txt
    print("\n### Multichannel online WPE grid + superdirective beam, 3 rooms (near-0.8m, mid-1.6m, far-3m)\n")
    print("| taps K | delay | alpha | near-0.8m | mid-1.6m | far-3m | mean of 3 |")
    print("|---|---|---|---|---|---|---|")
    g = {}
    for line in open("logs/wpegrid.txt"):
        f = line.split()
        g.setdefault(f[0], {})[f[1]] = (float(f[3]), float(f[5]))
    for k, v in g.items():
        K, dl, al = k.split("+")[0].split(":")[1:4]
        print(f"| {K} | {dl} | {al} | " + " | ".join(f"{v[r][0]:.2f} / {v[r][1]:.3f}" for r in ["near-0.8m", "mid-1.6m", "far-3m", "MEAN"]) + " |")
    print("\n(sd:nf:-10 alone on these rooms: " + " | ".join(f"{r} {C['sd:nf:-10'][r]['pesq']:.2f} / {C['sd:nf:-10'][r]['stoi']:.3f}" for r in ["near-0.8m", "mid-1.6m", "far-3m"]) + ")")
    for P in ["1_-30", "1_-200", "0_-30"]:
        try:
            Pj = json.load(open(f"results/perturb_{P}.json"))
        except FileNotFoundError:
            continue
        g, n = P.split("_")
        print(f"\n### Perturbed mics: gain error uniform +-{g} dB per mic, white self-noise {n} dB re mic-0 talk power\n"
              f"(`PERTURB={g}:{n} nice -n 10 python3 run.py ...`; C1/C2/C3 still against the UNPERTURBED anchors/mic0)\n")
        rows = [("", k, k) for k in Pj if all(r in Pj[k] for r in ROOMS)]
        t = table(rows, src=Pj, with_cost=False)
        print(t)

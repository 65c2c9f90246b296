"""Analytic real-time cost of a candidate pipeline (counted, not measured): complex multiply-
accumulates (CMAC) per STFT frame, per 10 ms and per second at 16 kHz, hop 128 (125 frames/s,
1.25 frames per 10 ms). 1 CMAC = 4 real mul + 4 real add = 8 flops. Real-valued work (FFTs, gains,
divisions) is counted in flops and converted to CMAC-equivalents (flops / 8). Worst case: every
frame a noise frame (covariance update) and, for sd, a new steering every frame (walking).
Usage: python3 cost.py [--md] CAND...   (no CAND: the stage table)"""
import sys

F = 257          # bins
M = 4            # mics
FR = 125.0       # frames per second
BUDGET = 1e8     # flops/s (~3 % of one core, the brief's figure)
FFT_FLOPS = 12300   # one 512-point real FFT (complex 256-FFT radix-2 + split) + window
RESAMPLE_FLOPS_PER_S_PER_CH = 2 * 241 * 16000   # farfield.to16k FIR (241 taps) polyphase, per channel


def stage_cmac(st):
    """CMAC per frame (incl. CMAC-equivalents of real work) for one stage spec."""
    a = st.split(":")
    k = a[0]
    if k == "mic0":
        return 0.0, "no beam"
    if k == "das":
        return F * M, "apply 4 weights/bin"
    if k in ("sd", "sdmu"):
        # fixed weights per direction from a table (far-field steering scores the same as near-field, so an
        # azimuth table suffices: 72 x 5 deg x 257 bins x 4 complex64 = 0.6 MB); recomputing instead on a
        # steering change costs 24 CMAC/bin (Ri d, d^H Ri d, scale; Ri = (Gamma+mu I)^-1 precomputed)
        return F * M, "apply 4 per bin (weights from a per-azimuth table; on-the-fly re-steer +24/bin)"
    if k == "omvdr":
        every = int(a[6]) if len(a) > 6 else 1
        cov = 10 + 4          # Hermitian 4x4 rank-1 update (10 products) + smoothing scale (~4 CMAC-eq)
        solve = 11 + 16 + 4 + 4 + 3   # Cholesky (M^3/6), fwd/back subst (M^2), d^H R^-1 d, normalise, loading/div
        return F * (cov + solve / every + M), f"cov update 14 + solve 38/{every} + apply 4 per bin"
    if k in ("wpe", "wpe1"):
        D = M if k == "wpe" else 1
        K = int(a[1])
        if k == "wpe":
            bins = int(a[4]) if len(a) > 4 and a[4] != "all" else F
            upd = int(a[5]) if len(a) > 5 else 1
        else:
            bins = int(a[5]) if len(a) > 5 and a[5] != "all" else F
            upd = int(a[6]) if len(a) > 6 else 1
        DK = D * K
        pred = D * DK
        update = DK * DK + DK * (DK + 1) / 2 + 2 * DK + D * DK   # P x, P update (Hermitian), x^H P x + gain, G update
        power = (4 * D + 6) / 8
        return bins * (pred + update / upd + power), f"D={D} K={K} DK={DK}: pred {pred} + RLS {update:.0f}/{upd} per bin, {bins} bins"
    if k in ("lr", "lrn", "lrm", "ns"):
        flops = 26 + (6 if k in ("lrn", "ns") else 0) + (8 if k == "lrm" else 0)
        return F * flops / 8, f"~{flops} flops/bin (PSD smoothing, late PSD, DD a-priori SIR, Wiener gain, floor)"
    if k in ("zel", "mcc"):
        # align 4 CMAC, 10 smoothed (cross-)spectra (1 CMAC + 1 CMAC-eq scaling each), 6 pair estimates
        flops = 6 * (6 if k == "zel" else 10) + 12
        return F * (4 + 20 + flops / 8), f"align 4 + 10 smoothed spectra 20 + {flops} flops/bin"
    raise ValueError(st)


def fft_cmac(cand):
    """STFT analysis of the mics the chain touches + one synthesis."""
    first = cand.split("+")[0]
    if first == "mic0":
        return 0.0
    chans = M
    return (chans + 1) * FFT_FLOPS / 8


def total(cand):
    parts = [(st, *stage_cmac(st)) for st in cand.split("+")]
    fft = fft_cmac(cand)
    cm = fft + sum(p[1] for p in parts)
    return cm, fft, parts


def row(cand):
    cm, fft, parts = total(cand)
    per10 = cm * 1.25
    persec = cm * FR
    flops = persec * 8
    return cm, per10, persec, flops, 100 * flops / BUDGET


if __name__ == "__main__":
    md = "--md" in sys.argv
    cands = [a for a in sys.argv[1:] if a != "--md"]
    if md:
        print("| candidate | CMAC/frame | CMAC/10 ms | MCMAC/s | Mflop/s | share of 1e8 flop/s |")
        print("|---|---|---|---|---|---|")
    for c in cands:
        cm, p10, ps, fl, pct = row(c)
        if md:
            print(f"| `{c}` | {cm:,.0f} | {p10:,.0f} | {ps/1e6:.2f} | {fl/1e6:.1f} | {pct:.0f} % |")
        else:
            print(f"{c:70} {cm:10,.0f} {p10:10,.0f} {ps/1e6:8.2f} M/s {fl/1e6:7.1f} Mflop/s {pct:6.1f}%")
    if not cands:
        print("| stage | CMAC/frame | CMAC/10 ms | MCMAC/s | Mflop/s | share of 1e8 flop/s | what is counted |")
        print("|---|---|---|---|---|---|---|")
        for st in ["das", "sd:nf:-10", "omvdr:0.01:1.0", "omvdr:0.01:1.0:0:gam:nf:4", "wpe:10:3:0.995", "wpe:6:3:0.995",
                   "wpe:10:3:0.995:128", "wpe:6:3:0.995:128:2", "wpe1:10:3:0.995", "wpe1:6:3:0.995:geo:128:2",
                   "lr:true:0.05:-12", "lrn:true:0.05:-12", "zel:-12", "mcc:-12"]:
            c, note = stage_cmac(st)
            print(f"| `{st}` | {c:,.0f} | {c*1.25:,.0f} | {c*FR/1e6:.2f} | {c*FR*8/1e6:.1f} | {100*c*FR*8/BUDGET:.1f} % | {note} |")
        print(f"| STFT 4 analysis + 1 synthesis (512-pt real FFT ~{FFT_FLOPS} flops) | {5*FFT_FLOPS/8:,.0f} | {5*FFT_FLOPS/8*1.25:,.0f} | "
              f"{5*FFT_FLOPS/8*FR/1e6:.2f} | {5*FFT_FLOPS*FR/1e6:.1f} | {100*5*FFT_FLOPS*FR/BUDGET:.1f} % | counted in every candidate except mic0 |")
        r = 4 * RESAMPLE_FLOPS_PER_S_PER_CH
        print(f"| resampler 48->16 kHz, farfield.to16k FIR 241 taps, 4 ch | - | - | (real) | {r/1e6:.1f} | {100*r/BUDGET:.1f} % | 241 real MAC per output sample per channel; NOT included in the candidate totals |")

"""scripts/bench call: the call's timeline (prepare) and PESQ-WB of what each end heard (analyze).

prepare WORK NEAR.wav FAR.wav: writes WORK/near-timeline.wav (roomd's talker from 3 s) and
WORK/far-timeline.wav (the caller's talker, from the moment the near talker has finished plus
a second, counted from the call's start: roomd answers at once), and WORK/timeline.json.

analyze WORK CODEC...: for each codec, PESQ-WB (P.862.2, 16 kHz) of
  - call.pesq_caller_hears_<codec>: baresip's decoder output against roomd's clean talker,
  - call.pesq_appliance_plays_<codec>: roomd's speaker against the caller's clean talker,
  - call.pesq_anchor_<codec>: the anchor's callee (baresip) against the caller's talker,
each recording aligned to its talker by cross-correlation first.
"""
import json
import os
import sys

import numpy as np
from pesq import pesq
from scipy.signal import fftconvolve, resample_poly

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quality import read_wav, write_wav  # noqa: E402  (the quality bench's WAV helpers)

LEAD_S = 3.0
GAP_S = 1.0


def to16k(rate, x):
    return x if rate == 16000 else resample_poly(x, 16000, rate)


def emit(metric, value, unit, **extra):
    line = {"bench": "call", "metric": metric, "value": round(float(value), 3), "unit": unit}
    line.update(extra)
    print(json.dumps(line), flush=True)


def prepare(work, near_path, far_path):
    rate, near = read_wav(near_path)
    _, far = read_wav(far_path)
    lead = np.zeros(int(LEAD_S * rate))
    near_line = np.concatenate([lead, near, np.zeros(len(far) + int(3 * rate))])
    far_start = int((LEAD_S + GAP_S) * rate) + len(near)
    far_line = np.concatenate([np.zeros(far_start), far, np.zeros(int(2 * rate))])
    write_wav(f"{work}/near-timeline.wav", rate, near_line)
    write_wav(f"{work}/far-timeline.wav", rate, far_line)
    write_wav(f"{work}/near.wav", rate, near)
    write_wav(f"{work}/far.wav", rate, far)
    with open(f"{work}/timeline.json", "w") as f:
        json.dump({"seconds": int(len(far_line) / rate + 1)}, f)


def aligned_pesq(ref, deg):
    """PESQ-WB of the part of `deg` (16 kHz) that best matches `ref` (16 kHz)."""
    if len(deg) < len(ref):
        deg = np.concatenate([deg, np.zeros(len(ref) - len(deg))])
    c = fftconvolve(deg, ref[::-1], mode="valid")
    lag = int(np.argmax(np.abs(c)))
    seg = deg[lag:lag + len(ref)]
    return pesq(16000, ref, seg, "wb"), lag / 16000.0


def dump(path):
    import glob
    files = sorted(glob.glob(f"{path}/dumps/*-dec.wav"))
    return files[-1] if files else None


def analyze(work, codecs):
    near = to16k(*read_wav(f"{work}/near.wav"))
    far = to16k(*read_wav(f"{work}/far.wav"))
    for codec in codecs:
        leg = f"{work}/{codec}"
        runs = [("pesq_caller_hears", dump(f"{leg}/far"), near, "roomd's talker at baresip (caller)"),
                ("pesq_appliance_plays", f"{leg}/roomd-speaker.wav", far, "the caller's talker at roomd's speaker"),
                ("pesq_anchor", dump(f"{leg}/anchor-b"), far, "the caller's talker at a baresip callee (anchor)")]
        for metric, path, ref, what in runs:
            try:
                score, at = aligned_pesq(ref, to16k(*read_wav(path)))
                emit(f"{metric}_{codec}", score, "MOS-LQO", what=what, found_at_s=round(at, 2))
            except Exception as e:  # a missing recording is reported, not hidden
                emit(f"{metric}_{codec}", float("nan"), "MOS-LQO", what=what, error=str(e)[:200])


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        analyze(sys.argv[2], sys.argv[3:])

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


BRIDGE_TALKERS = ("a", "b", "far")


def bridge_timeline(work, a_path, b_path, far_path):
    """Talkers in turn: A from 3 s, B 1 s after A, the caller 1 s after B; each file on its own
    recorder's time base (A's and B's from their roomd's start, the caller's from the call's:
    A answers about 1 s after it started, so the caller's turn is placed 1 s earlier)."""
    rate, a = read_wav(a_path)
    _, b = read_wav(b_path)
    _, far = read_wav(far_path)
    starts = {"a": LEAD_S, "b": LEAD_S + len(a) / rate + GAP_S}
    starts["far"] = starts["b"] + len(b) / rate + GAP_S
    total = starts["far"] + len(far) / rate + 3
    segments = {}
    for name, x, shift in (("a", a, 0.0), ("b", b, 0.0), ("far", far, -1.0)):
        at = int((starts[name] + shift) * rate)
        line = np.zeros(int(total * rate))
        line[at:at + len(x)] = x
        write_wav(f"{work}/{name}-timeline.wav", rate, line)
        write_wav(f"{work}/{name}.wav", rate, x)
        segments[name] = {"start": at / rate, "length": len(x) / rate}
    with open(f"{work}/timeline.json", "w") as f:
        json.dump({"seconds": int(total + 1), "segments": segments}, f)


def envelope(x, rate):
    n = rate // 100
    frames = len(x) // n
    return 10 * np.log10(np.mean(x[:frames * n].reshape(frames, n) ** 2, axis=1) + 1e-10)


# Nobody hears themselves: one's own voice back at least this far below one's speech. A level,
# not a correlation: a residual of one's own speech correlates with it at any level (its envelope
# is the speech's), and what makes it inaudible is how far down it is. 40 dB is our choice, under
# the talker's own room noise in a meeting; the loss ITU-T G.131 asks of talker echo at long delays
# is of the same order (its TELR also counts the terminals' loudness ratings).
SELF_LEVEL_LIMIT_DB = -40.0


def bridge(work):
    """For each recording (the caller's decoder output, A's and B's speakers) and each talker:
    PESQ-WB of the others' turns, and for the recorder's own talker the level of its own turn in
    its own recording (dB against the talker) and the envelope correlation there."""
    with open(f"{work}/timeline.json") as f:
        segments = json.load(f)["segments"]
    recordings = {"far": dump(f"{work}/far"), "a": f"{work}/a-speaker.wav", "b": f"{work}/b-speaker.wav"}
    heard_themselves = []
    for listener, path in recordings.items():
        try:
            rate, rec = read_wav(path)
        except Exception as e:
            emit(f"bridge_{listener}_recording", float("nan"), "", error=str(e)[:200])
            continue
        rec16 = to16k(rate, rec)
        for talker in BRIDGE_TALKERS:
            r, ref = read_wav(f"{work}/{talker}.wav")
            if talker != listener:
                score, at = aligned_pesq(to16k(r, ref), rec16)
                emit(f"bridge_pesq_{listener}_hears_{talker}", score, "MOS-LQO", found_at_s=round(at, 2))
                continue
            seg = segments[talker]
            start = int(seg["start"] * rate)
            own = rec[start:start + len(ref) * rate // r]
            level = 10 * np.log10((np.mean(own ** 2) + 1e-12) / (np.mean(ref ** 2) + 1e-12))
            e_ref, e_own = envelope(ref, r), envelope(own, rate)
            k = min(len(e_ref), len(e_own))
            corr = float(np.corrcoef(e_ref[:k], e_own[:k])[0, 1]) if k > 10 else float("nan")
            emit(f"bridge_self_level_{listener}", level, "dB", what=f"{listener}'s own talker in its own recording, during its turn")
            emit(f"bridge_self_correlation_{listener}", corr, "", what="envelope correlation of its own talker there")
            if not level <= SELF_LEVEL_LIMIT_DB:
                heard_themselves.append(listener)
    emit("bridge_heard_themselves", len(heard_themselves), "", who=",".join(heard_themselves),
         limit_db=SELF_LEVEL_LIMIT_DB, what="listeners whose own talker came back above the limit (docs/benchmarks.md, call)")


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "bridge-timeline":
        bridge_timeline(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    elif sys.argv[1] == "bridge":
        bridge(sys.argv[2])
    else:
        analyze(sys.argv[2], sys.argv[3:])

#!/usr/bin/env python3
"""scripts/bench quality: PESQ-WB (ITU-T P.862.2) of what B's speaker played against what A's mic
heard, per voice and per loss rate.

  quality.py prepare WORK NAME...     WORK/NAME.wav (48 kHz speech) -> WORK/talk.wav + segments.json
  quality.py analyze WORK LOSS...     WORK/run-LOSS/ -> JSON metric lines (scripts/bench format)

The talk file is a lead-in of silence, then each voice followed by a pause. B's speaker is first
aligned to the whole talk by cross-correlation (the mouth-to-ear delay, a few tens of ms), then
each voice's segment is aligned again on its own (the jitter buffer may have moved the playout
point between voices) and scored against the clean input at 16 kHz (pesq, mode "wb").
Needs numpy, scipy and pesq (quality.sh installs pesq from PyPI when it is missing)."""
import json
import math
import os
import sys
import wave

import numpy as np
from scipy.signal import fftconvolve, resample_poly

RATE = 48000
LEAD_S = 3.0    # silence before the first voice: A's join and first bindings (up to ~3 s with loss)
PAUSE_S = 1.5   # silence after each voice


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2, path
        ch = w.getnchannels()
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64) / 32768.0
        if ch > 1:
            x = x.reshape(-1, ch)[:, 0]
        return w.getframerate(), x


def write_wav(path, rate, x):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.clip(np.round(x * 32767), -32768, 32767).astype("<i2").tobytes())


def emit(metric, value, unit, **extra):
    line = {"bench": "quality", "metric": metric, "value": round(float(value), 3), "unit": unit}
    line.update(extra)
    print(json.dumps(line), flush=True)


def prepare(work, names):
    parts, segments, pos = [np.zeros(int(LEAD_S * RATE))], [], int(LEAD_S * RATE)
    for name in names:
        rate, x = read_wav(f"{work}/{name}.wav")
        assert rate == RATE, f"{name}.wav is {rate} Hz"
        segments.append({"voice": name, "start": pos, "length": len(x)})
        parts += [x, np.zeros(int(PAUSE_S * RATE))]
        pos += len(x) + int(PAUSE_S * RATE)
    write_wav(f"{work}/talk.wav", RATE, np.concatenate(parts))
    with open(f"{work}/segments.json", "w") as f:
        json.dump(segments, f)
    print(f"{pos / RATE:.1f}")  # seconds of talk, for the caller's durations


def best_lag(ref, deg, lo, hi):
    """Lag L in [lo, hi] maximizing sum ref[n] * deg[n + L] (deg is ref delayed by L)."""
    lo, hi = max(lo, -len(ref) + 1), min(hi, len(deg) - 1)
    c = fftconvolve(deg, ref[::-1], mode="full")  # c[k] = sum ref[n] deg[n + k - (len(ref) - 1)]
    lags = np.arange(len(c)) - (len(ref) - 1)
    keep = (lags >= lo) & (lags <= hi)
    i = np.argmax(c[keep])
    peak = c[keep][i] / (np.linalg.norm(ref) * np.linalg.norm(deg) + 1e-12)
    return int(lags[keep][i]), float(peak)


def playout_moves(ref, spk16, at):
    """How often the playout point moved inside a voice: the lag of each voiced 0.5 s window
    (±50 ms search) against the voice's own alignment; each change of more than 2 ms between
    consecutive windows is a jitter-buffer stretch or squeeze (a frame concealed or dropped
    mid-speech). PESQ punishes those though they are no codec artefact; counting them tells
    the codec and the receive path apart."""
    moves, last, w = 0, None, 8000
    for i in range(0, len(ref) - w, w):
        r = ref[i:i + w]
        lo = at + i - 800
        if np.sqrt(np.mean(r ** 2)) < 0.01 or lo < 0 or lo + w + 1600 > len(spk16):
            continue
        lag, peak = best_lag(r, spk16[lo:lo + w + 1600], 0, 1600)
        if peak < 0.5:
            continue
        if last is not None and abs(lag - last) > 32:
            moves += 1
        last = lag
    return moves


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        out = []
        for l in f:
            if l.startswith("{"):
                try:
                    out.append(json.loads(l))
                except json.JSONDecodeError:
                    pass
        return out


def last_stats(path):
    """The last status line (cumulative counters) and the summary of a roomd --json run."""
    ls = lines(path)
    stats = [l for l in ls if "periods" in l and not l.get("summary")]
    summary = next((l for l in ls if l.get("summary")), {})
    return (stats[-1] if stats else {}), summary


def analyze(work, losses):
    from pesq import pesq  # imported here so `prepare` runs without it
    with open(f"{work}/segments.json") as f:
        segments = json.load(f)
    _, talk = read_wav(f"{work}/talk.wav")
    talk16 = resample_poly(talk, 1, 3)
    settings = os.environ.get("QUALITY_SETTINGS", "")
    results = {}
    for loss in losses:
        run = f"{work}/run-{loss}"
        rate, spk = read_wav(f"{run}/b-speaker.wav")
        assert rate == RATE
        spk16 = resample_poly(spk, 1, 3)
        # Whole-talk alignment: B's speaker file starts when B's playback starts, A's input when
        # A's capture starts (B starts first), so the lag is positive and bounded by the run.
        lag, peak = best_lag(talk16, spk16, -16000, 16000 * 10)
        a_stats, a_sum = last_stats(f"{run}/a.jsonl")
        b_stats, b_sum = last_stats(f"{run}/b.jsonl")
        xruns = sum(int(s.get(k, 0)) for s in (a_sum, b_sum) for k in ("capture_xruns", "playback_xruns"))
        scores = []
        for seg in segments:
            s, n = seg["start"] // 3, seg["length"] // 3
            ref = talk16[s:s + n]
            # Per-voice alignment within ±80 ms of the whole-talk lag.
            win = spk16[max(0, s + lag - 1280): s + lag + n + 1280]
            off = max(0, s + lag - 1280)
            l2, p2 = best_lag(ref, win, 0, len(win) - n)
            deg = spk16[off + l2: off + l2 + n]
            if len(deg) < n or np.sqrt(np.mean(deg ** 2)) < 1e-4:
                score = float("nan")  # nothing was heard: the chain is broken, not the codec
            else:
                try:
                    score = pesq(16000, ref, deg, "wb")
                except Exception as e:  # pesq raises on "no utterances detected"
                    print(f"quality: pesq failed for {seg['voice']} at {loss} %: {e}", file=sys.stderr)
                    score = float("nan")
            scores.append({"voice": seg["voice"], "pesq": round(score, 3), "corr": round(p2, 3),
                           "lag_ms": round((off + l2 - s) / 16, 1),
                           "playout_moves": playout_moves(ref, spk16, off + l2)})
        ok = [x["pesq"] for x in scores if not math.isnan(x["pesq"])]
        mean = float(np.mean(ok)) if len(ok) == len(scores) else float("nan")
        moves = sum(x["playout_moves"] for x in scores)
        proxy = next((l for l in lines(f"{run}/proxy.jsonl") if l.get("final")), {})
        up = proxy.get("up", {})
        results[loss] = mean
        emit(f"quality.pesq_{loss}", mean if not math.isnan(mean) else -1, "MOS-LQO",
             min=round(min(ok), 3) if ok else None, voices=scores, loss_pct=loss,
             proxy_dropped=up.get("dropped"), proxy_received=up.get("received"),
             up_bytes_per_packet=round(up["bytes"] / up["forwarded"], 1) if up.get("forwarded") else None,
             xruns=xruns, playout_moves=moves, a_xruns=[a_sum.get("capture_xruns"), a_sum.get("playback_xruns")],
             b_xruns=[b_sum.get("capture_xruns"), b_sum.get("playback_xruns")],
             a_packets=a_stats.get("packets"), a_dtx_suppressed=a_stats.get("dtx_suppressed"),
             b_received_lost=b_stats.get("received_lost"), b_fec=b_stats.get("fec"), b_plc=b_stats.get("plc"),
             b_late=b_stats.get("late"), b_jitter_delay_ms=b_stats.get("jitter_delay_ms"),
             a_cpu_pct=a_sum.get("cpu_pct"), b_cpu_pct=b_sum.get("cpu_pct"), settings=settings,
             measure="PESQ-WB (P.862.2, pypi pesq) of B's speaker vs A's clean input, 16 kHz, per voice "
                     "aligned by cross-correlation; mean over voices (min alongside); loss on A's uplink (roomproxy)")
    for loss, mean in results.items():
        if math.isnan(mean):
            sys.exit(f"bench quality: no score at {loss} % loss (a voice was not heard at B)")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("prepare", "analyze"):
        sys.exit(__doc__)
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3:])
    else:
        analyze(sys.argv[2], [int(x) for x in sys.argv[3:]])

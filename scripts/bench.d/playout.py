#!/usr/bin/env python3
"""PESQ-WB of PlayoutUnderLossTests' offline receive path (no sound card, no network).

  ROOMD_PLAYOUT_SIM=DIR ROOMD_PLAYOUT_LOSSES="0 5 10 20" swift test --disable-swift-testing \\
      --filter PlayoutUnderLossTests.testWritePlayoutUnderLossForPESQ
  python3 scripts/bench.d/playout.py DIR

DIR holds 48 kHz mono 16-bit speech WAVs (e.g. espeak-ng through sox, as scripts/bench makes
them); the test writes DIR/out/NAME-LOSS-PERIODMS.wav, the speaker signal of each through the
real Opus encoder (FEC on), seeded random loss and RemoteStreams rendering 10 or 5 ms periods.
Each is aligned to its input (best lag of the whole file, 16 kHz) and scored; means per loss
rate and period."""
import glob
import os
import sys
import wave

import numpy as np
from pesq import pesq
from scipy.signal import resample_poly


def read(path):
    with wave.open(path) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(float) / 32768


def main():
    d = sys.argv[1]
    scores = {}
    for f in sorted(glob.glob(f"{d}/out/*.wav")):
        base, loss, period = os.path.basename(f)[:-4].rsplit("-", 2)
        ref = resample_poly(read(f"{d}/{base}.wav"), 1, 3)
        deg = resample_poly(read(f), 1, 3)
        n = len(ref) - 2000
        lag = max(range(0, 1600, 2), key=lambda k: float(np.dot(ref[:n], deg[k:k + n])))
        s = pesq(16000, ref, deg[lag:lag + len(ref)], "wb")
        scores.setdefault((int(loss), int(period)), []).append(s)
        print(f"{base} loss {loss} % period {period} ms: lag {lag / 16:.1f} ms, PESQ-WB {s:.3f}")
    for (loss, period), v in sorted(scores.items()):
        print(f"loss {loss} % period {period} ms: mean {np.mean(v):.3f} over {len(v)}")


if __name__ == "__main__":
    main()

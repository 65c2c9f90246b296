#!/usr/bin/env python3
"""Writes Tests/Fixtures/g722/ from libspandsp's G.722 (through ./g722-oracle, build it first
with `make`): a synthetic 3 s input meant to reach the codec's corners, its G.722 bytes and
their decoding, plus random bytes (codes no encoder sends) and their decoding.

Deterministic (fixed seed): running it again rewrites the same files."""
import os
import subprocess
import sys

import numpy as np

RATE = 16000
here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "..", "..", "Tests", "Fixtures", "g722")
oracle = os.path.join(here, "g722-oracle")
rng = np.random.default_rng(722)


def seconds(s):
    return np.arange(int(s * RATE)) / RATE


def voiced(duration, f0_start, f0_end, level):
    """A vowel-ish sound: harmonics of a gliding pitch under two moving formant weights,
    with a syllable-rate envelope."""
    t = seconds(duration)
    f0 = np.linspace(f0_start, f0_end, t.size)
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    x = np.zeros(t.size)
    for k in range(1, 40):
        freq = k * f0
        weight = np.exp(-((freq - 700) / 300) ** 2) + 0.6 * np.exp(-((freq - 2200) / 500) ** 2) + 0.05
        x += np.where(freq < RATE / 2, weight * np.sin(k * phase) / k ** 0.5, 0)
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * t)
    return level * envelope * x / np.max(np.abs(x))


def noise(duration, level):
    return level * rng.standard_normal(int(duration * RATE))


def chirp(duration, f_start, f_end, level):
    t = seconds(duration)
    k = (f_end - f_start) / duration
    return level * np.sin(2 * np.pi * (f_start * t + k * t * t / 2))


pieces = [
    np.zeros(int(0.15 * RATE)),                                   # digital silence
    noise(0.1, 3),                                                # the quietest noise
    voiced(0.5, 110, 160, 9000),                                  # a male-ish voice
    voiced(0.4, 220, 180, 14000) + noise(0.4, 300),               # a female-ish voice over noise
    noise(0.08, 12000), np.zeros(int(0.05 * RATE)),               # a burst, then silence: the
    noise(0.04, 25000), np.zeros(int(0.1 * RATE)),                # scale factors' fall
    np.clip(3 * voiced(0.3, 150, 150, 32767), -32768, 32767),     # clipped speech
    np.tile([32767.0, -32768.0], int(0.05 * RATE / 2)),           # full scale at Nyquist
    np.tile([32767.0] * 40 + [-32768.0] * 40, int(0.1 * RATE / 80)),  # a full-scale square wave
    np.full(int(0.05 * RATE), 32767.0), np.full(int(0.05 * RATE), -32768.0),  # full-scale DC
    chirp(0.6, 50, 7950, 20000),                                  # every frequency
    chirp(0.2, 7950, 100, 32767),                                 # again, at full scale
    np.sin(2 * np.pi * 1000 * seconds(0.17)) * 16000,             # a plain tone
    np.zeros(int(0.05 * RATE)),
]
signal = np.clip(np.round(np.concatenate(pieces)), -32768, 32767).astype("<i2")
assert signal.size % 2 == 0
# Random bytes: codes the encoder never produces (the low band's four unused codes among them),
# which the decoder still has to turn into the same samples as the far end's.
random_bytes = rng.integers(0, 256, 2000, dtype=np.uint8)

os.makedirs(out, exist_ok=True)
signal.tofile(os.path.join(out, "input.s16"))
random_bytes.tofile(os.path.join(out, "random.g722"))


def run(mode, source, target):
    subprocess.run([oracle, mode, os.path.join(out, source), os.path.join(out, target)], check=True)


run("encode", "input.s16", "input.g722")
run("decode", "input.g722", "input-decoded.s16")
run("decode", "random.g722", "random-decoded.s16")
for name in sorted(os.listdir(out)):
    print(f"{name}: {os.path.getsize(os.path.join(out, name))} bytes", file=sys.stderr)

#!/usr/bin/env python3
"""Writes larger inputs than the fixtures into DIR, for compare.sh: 60 s each of level-hopping
white noise, random full-scale extremes, a wrapping random walk, frequency-hopping overdriven
sines and sparse full-scale impulses (16 kHz s16le), and 400,000 random and 400,000 biased
G.722 bytes (mostly the codes at the quantizers' ends). Not kept in the repository."""
import os
import sys

import numpy as np

directory = sys.argv[1]
os.makedirs(directory, exist_ok=True)
rng = np.random.default_rng(1)
RATE = 16000
n = 60 * RATE


def write(name, x):
    np.clip(np.round(x), -32768, 32767).astype("<i2").tofile(os.path.join(directory, name))


levels = np.repeat(10 ** rng.uniform(-5, 0.3, n // 800 + 1), 800)[:n]
write("noise.s16", rng.standard_normal(n) * levels * 32768)
write("extremes.s16", rng.choice([-32768, 32767, 0, -1, 1], n))
write("walk.s16", np.cumsum(rng.standard_normal(n)) * 300 % 65536 - 32768)
frequencies = np.repeat(rng.uniform(20, 7990, n // 400 + 1), 400)[:n]
write("hop.s16", 40000 * np.sin(2 * np.pi * np.cumsum(frequencies) / RATE))
impulses = np.zeros(n)
impulses[rng.integers(0, n, 3000)] = rng.choice([-32768, 32767], 3000)
write("impulses.s16", impulses)
rng.integers(0, 256, 400000, dtype=np.uint8).tofile(os.path.join(directory, "random.g722"))
ends = np.array([0, 1, 2, 3, 4, 5, 32, 33, 63, 62, 0xC4, 0x7C, 0xFF, 0x80], dtype=np.uint8)
rng.choice(ends, 400000).tofile(os.path.join(directory, "biased.g722"))

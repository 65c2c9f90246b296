"""scripts/bench scene: the sim card's image-source responses against pyroomacoustics.

Usage: scene.py check WORK ROOMSIM_SCENE

For a few rooms (RT60 0.3-0.8 s, sources 0.8-3 m from the board's 4-mic array) it writes a
scene, has `roomsim-scene --irs` write the card's responses from every source to every mic,
builds the same room in pyroomacoustics (ShoeBox, the same energy absorption, image sources
only, no air absorption, enough orders to reach the response's end) and compares, per source
and mic:
  - the direct path's arrival (sample, parabolic peak), against the geometry's d / c;
  - RT60 from Schroeder's backward integral (T20: -5 to -25 dB, times 3);
  - the direct-to-reverberant ratio (energy within 2.5 ms of the direct arrival vs the rest).
pyroomacoustics' own 10 Hz high-pass is switched off and the card's 50 Hz high-pass (2nd-order
Butterworth) applied to its responses, so both are filtered alike; its responses start 40
samples late (the centre of its 81-tap fractional delay), which is taken off.
Prints one JSON line per metric (scene.*) and a table on stderr.
"""
import json
import os
import subprocess
import sys

import numpy as np
import scipy.io.wavfile as wavfile
import scipy.signal as signal

MICS = [(0.032, 0, 0), (0, 0.032, 0), (-0.032, 0, 0), (0, -0.032, 0)]
RATE = 16000  # the comparison's rate: pyroomacoustics' image sum is slow at 48 kHz
C = 343.0

# name, room size, rt60 s, array centre, sources (absolute positions)
ROOMS = [
    ("small-0.3s", (4.0, 3.5, 2.6), 0.3, (2.0, 1.7, 0.75), [(2.8, 1.9, 1.2), (1.2, 2.6, 1.1)]),
    ("meeting-0.5s", (6.0, 4.5, 2.8), 0.5, (3.0, 2.2, 0.75), [(4.2, 2.9, 1.2), (1.4, 1.5, 1.25), (3.1, 4.0, 1.15)]),
    ("large-0.8s", (9.0, 6.0, 3.2), 0.8, (4.5, 3.0, 0.75), [(7.3, 4.1, 1.2), (4.0, 1.2, 1.3)]),
]


def direct_arrival(h, expected):
    """Peak of |h| within 3 samples of the expected arrival, refined with a parabola."""
    lo, hi = max(0, int(expected) - 3), int(expected) + 5
    i = lo + int(np.argmax(np.abs(h[lo:hi])))
    if 0 < i < len(h) - 1:
        a, b, c = np.abs(h[i - 1]), np.abs(h[i]), np.abs(h[i + 1])
        den = a - 2 * b + c
        if den != 0:
            return i + 0.5 * (a - c) / den
    return float(i)


def rt60(h):
    e = np.cumsum((h.astype(np.float64) ** 2)[::-1])[::-1]
    edc = 10 * np.log10(e / e[0] + 1e-30)
    t5 = np.argmax(edc <= -5)
    t25 = np.argmax(edc <= -25)
    if t25 <= t5:
        return float("nan")
    slope, _ = np.polyfit(np.arange(t5, t25) / RATE, edc[t5:t25], 1)
    return -60.0 / slope


def drr(h, arrival):
    w = int(round(0.0025 * RATE))
    a = int(round(arrival))
    direct = np.sum(h[max(0, a - w):a + w + 1] ** 2)
    rest = np.sum(h ** 2) - direct
    return 10 * np.log10(direct / rest)


def read(path):
    rate, x = wavfile.read(path)
    assert rate == RATE, path
    return x.astype(np.float64)


def main():
    import pyroomacoustics as pra
    pra.constants.set("rir_hpf_enable", False)
    pra.constants.set("c", C)
    work, tool = sys.argv[2], sys.argv[3]
    b, a = signal.butter(2, 50, "highpass", fs=RATE)
    worst = {"delay": 0.0, "delay_geometry": 0.0, "rt60": 0.0, "drr": 0.0}
    rows = []
    for name, dims, t60, centre, sources in ROOMS:
        d = os.path.join(work, "scene-" + name)
        os.makedirs(d, exist_ok=True)
        lines = [f"room = {dims[0]} {dims[1]} {dims[2]}", f"rt60_ms = {t60 * 1000}",
                 f"array = {centre[0]} {centre[1]} {centre[2]}", f"rate = {RATE}",
                 f"ir_ms = {t60 * 1000 + 60}"]
        lines += [f"mic{m} = {x} {y} {z}" for m, (x, y, z) in enumerate(MICS)]
        # talker files are not read when only the responses are written
        for i, s in enumerate(sources):
            lines += [f"talker{i + 1} = none.wav", f"talker{i + 1}_at = {s[0]} {s[1]} {s[2]}"]
        with open(os.path.join(d, "room.scene"), "w") as f:
            f.write("\n".join(lines) + "\n")
        out = subprocess.run([tool, os.path.join(d, "room.scene"), "--no-render", "--irs", d],
                             check=True, capture_output=True, text=True).stdout
        info = json.loads(out)
        absorption = info["absorption"]
        mics = np.array([[centre[i] + m[i] for m in MICS] for i in range(3)])
        n = info["ir_samples"]
        reach = n / RATE * C
        R = min(l1 * l2 / np.hypot(l1, l2) for l1, l2 in [(dims[0], dims[1]), (dims[0], dims[2]), (dims[1], dims[2])])
        order = int(np.ceil(reach / R)) + 1
        room = pra.ShoeBox(dims, fs=RATE, materials=pra.Material(absorption), max_order=order,
                           air_absorption=False)
        for s in sources:
            room.add_source(list(s))
        room.add_microphone_array(pra.MicrophoneArray(mics, RATE))
        room.compute_rir()
        fdl = pra.constants.get("frac_delay_length") // 2
        for i, s in enumerate(sources):
            for m in range(len(MICS)):
                ours = read(os.path.join(d, f"talker{i + 1}-mic{m}.wav"))
                ref = np.asarray(room.rir[m][i], dtype=np.float64)[fdl:]
                ref = signal.lfilter(b, a, ref)[:n]
                ours = ours[:len(ref)]
                dist = np.linalg.norm(np.array(s) - mics[:, m])
                expected = dist / C * RATE
                ours_at, ref_at = direct_arrival(ours, expected), direct_arrival(ref, expected)
                row = {
                    "room": name, "source": i + 1, "mic": m, "distance_m": round(float(dist), 3),
                    "delay_ours": ours_at - expected, "delay_ref": ref_at - expected,
                    "rt60_ours": rt60(ours), "rt60_ref": rt60(ref), "rt60_target": t60,
                    "drr_ours": drr(ours, ours_at), "drr_ref": drr(ref, ref_at),
                }
                rows.append(row)
                worst["delay"] = max(worst["delay"], abs(row["delay_ours"] - row["delay_ref"]))
                worst["delay_geometry"] = max(worst["delay_geometry"], abs(row["delay_ours"]))
                worst["rt60"] = max(worst["rt60"], abs(row["rt60_ours"] / row["rt60_ref"] - 1))
                worst["drr"] = max(worst["drr"], abs(row["drr_ours"] - row["drr_ref"]))
    print(f"{'room':14} src mic  dist   delay(ours/ref, samples)  RT60 ours/ref/target (s)  DRR ours/ref (dB)", file=sys.stderr)
    for r in rows:
        print(f"{r['room']:14} {r['source']:3} {r['mic']:3} {r['distance_m']:5.2f}   {r['delay_ours']:+.3f} / {r['delay_ref']:+.3f}"
              f"            {r['rt60_ours']:.3f} / {r['rt60_ref']:.3f} / {r['rt60_target']:.2f}"
              f"        {r['drr_ours']:+.2f} / {r['drr_ref']:+.2f}", file=sys.stderr)
    ours_t = [r["rt60_ours"] / r["rt60_target"] - 1 for r in rows]
    for metric, value, unit in [
        ("scene.delay_vs_reference_max_samples", worst["delay"], "samples at 16 kHz"),
        ("scene.delay_vs_geometry_max_samples", worst["delay_geometry"], "samples at 16 kHz"),
        ("scene.rt60_vs_reference_max_pct", 100 * worst["rt60"], "%"),
        ("scene.rt60_vs_target_max_pct", 100 * max(abs(x) for x in ours_t), "%"),
        ("scene.drr_vs_reference_max_db", worst["drr"], "dB"),
    ]:
        print(json.dumps({"bench": "scene", "metric": metric, "value": round(float(value), 3), "unit": unit,
                          "pairs": len(rows)}))


if __name__ == "__main__":
    main()

"""The talker locator offline on the farfield rooms and on held-out rooms it was not tuned on,
with oracle voice activity (the dry talkers' energy): median error and lock-on per room.

  python3 locator.py BIN     BIN: the build's bin directory holding roomsim-scene

Renders into $FARFIELD_STUDY_INPUT (default /tmp/loc; the farfield rooms must have been rendered
by ../prepare.py), builds harness.cpp with g++ against Sources/CCaptureChain, runs it per room.
"""
import os
import subprocess
import sys
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts", "bench.d"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import farfield  # noqa: E402

HELD_OUT = {
    "h-1.0m-135": dict(room=(5.5, 4.2, 2.7), rt60=0.35, array=(2.4, 2.3, 0.74), talkers=[("ff_de_f", 135, 1.0, 1.2, 0.5)],
                       noise=("vent", (5.0, 0.5, 2.6), 18)),
    "h-2.0m--45": dict(room=(7.0, 5.5, 3.0), rt60=0.6, array=(3.2, 2.9, 0.76), talkers=[("ff_en_m", -45, 2.0, 1.25, 0.5)],
                       noise=("pink", "diffuse", 16)),
    "h-2.8m-170": dict(room=(8.5, 6.5, 3.1), rt60=0.75, array=(4.6, 3.1, 0.75), talkers=[("ff_en_f", 170, 2.8, 1.2, 0.5)],
                       noise=("fan", (0.5, 6.0, 0.4), 14)),
    "h-turns-wrap": dict(room=(6.5, 5.0, 2.8), rt60=0.45, array=(3.3, 2.4, 0.75),
                         talkers=[("ff_de_m", -170, 1.4, 1.2, 0.5), ("ff_en_f", 100, 1.8, 1.25, 8.5)],
                         noise=("vent", (6.0, 4.5, 2.7), 20)),
}


def render(tool, base, name, spec):
    d = os.path.join(base, name)
    os.makedirs(d, exist_ok=True)
    text, _ = farfield.scene_text(spec, os.path.join(base, "v"))
    for scene, body, wav in [("room.scene", text, "mics.wav"),
                             ("clean.scene", "\n".join(l for l in text.split("\n") if not l.startswith("noise")) + "\n", "clean.wav")]:
        with open(os.path.join(d, scene), "w") as f:
            f.write(body)
        if not os.path.exists(os.path.join(d, wav)):
            subprocess.run([tool, os.path.join(d, scene), "--render", os.path.join(d, wav)], check=True, capture_output=True)
    x = farfield.read_wav(os.path.join(d, "clean.wav"))[:, 0]
    n = len(x) // 480
    e = (x[:n * 480].reshape(n, 480) ** 2).mean(1)
    with open(os.path.join(d, "listen.txt"), "w") as f:
        f.write("\n".join(map(str, (e > e.max() * 1e-3).astype(int))))
    return d


def wrap(d):
    return (d + 180) % 360 - 180


def main():
    tool = os.path.join(sys.argv[1], "roomsim-scene")
    base = os.environ.get("FARFIELD_STUDY_INPUT", "/tmp/loc")
    harness = os.path.join(base, "locator-harness")
    subprocess.run(["g++", "-O2", "-I", os.path.join(ROOT, "Sources", "CCaptureChain"), "-I", os.path.join(ROOT, "Sources", "CRoomFFT", "include"), "-o", harness,
                    os.path.join(HERE, "harness.cpp")], check=True)
    rooms = dict(farfield.ROOMS)
    rooms.update(HELD_OUT)
    for name, spec in rooms.items():
        spec = dict(spec)
        d = render(tool, base, name, spec)
        spec["_seconds"] = [wave.open(os.path.join(base, "v", t[0] + ".wav")).getnframes() / 48000 for t in spec["talkers"]]
        out = subprocess.run([harness, os.path.join(d, "mics.wav"), os.path.join(d, "listen.txt")],
                             check=True, capture_output=True, text=True).stdout
        rows = [l.split() for l in out.splitlines()]
        errors = [abs(wrap(float(r[1]) - farfield.true_azimuth(spec, float(r[0]))))
                  for r in rows if int(r[5]) and int(r[2])]
        locks = []
        for voice, az, dist, height, start in spec["talkers"]:
            first = next(float(r[0]) for r in rows if float(r[0]) >= start and int(r[5]))
            hit = next((float(r[0]) for r in rows if float(r[0]) >= first and int(r[2])
                        and abs(wrap(float(r[1]) - farfield.true_azimuth(spec, float(r[0])))) <= 20), None)
            locks.append(None if hit is None else round((hit - first) * 1000))
        print(f"{name:14} {'held out' if name in HELD_OUT else 'tuned on':8}  median {np.median(errors):5.1f}°  "
              f"p90 {np.percentile(errors, 90):5.1f}°  lock-on after the first listened block {locks} ms")


if __name__ == "__main__":
    main()

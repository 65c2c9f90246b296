"""Renders the study's inputs: every room of scripts/bench.d/farfield.py (ROOMS) with
roomsim-scene into $FARFIELD_STUDY_INPUT (default /tmp/loc): <room>/mics.wav (talkers and
noise), <room>/clean.wav (talkers only), <room>/room.scene, and the voices in v/.

  python3 prepare.py BIN     BIN: the build's bin directory holding roomsim-scene
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench.d"))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import farfield  # noqa: E402

VOICES = {
    "ff_en_m": ("en-us", "Good morning everyone, thanks for joining. Today we review the release schedule and the results of the field trial in the Berlin office."),
    "ff_en_f": ("en-gb+f3", "Good morning everyone, thanks for joining. Today we review the release schedule and the results of the field trial in the Berlin office."),
    "ff_de_m": ("de", "Guten Morgen zusammen, danke, dass ihr dabei seid. Heute besprechen wir den Zeitplan und die Ergebnisse aus dem Berliner Büro."),
    "ff_de_f": ("de+f3", "Guten Morgen zusammen, danke, dass ihr dabei seid. Heute besprechen wir den Zeitplan und die Ergebnisse aus dem Berliner Büro."),
}


def main():
    tool = os.path.join(sys.argv[1], "roomsim-scene")
    out = os.environ.get("FARFIELD_STUDY_INPUT", "/tmp/loc")
    voices = os.path.join(out, "v")
    os.makedirs(voices, exist_ok=True)
    for name, (voice, text) in VOICES.items():
        wav = os.path.join(voices, name + ".wav")
        if not os.path.exists(wav):
            subprocess.run(["espeak-ng", "-v", voice, "-s", "150", "-w", wav + ".raw.wav", text], check=True)
            subprocess.run(["sox", wav + ".raw.wav", "-r", "48000", "-c", "1", "-b", "16", wav, "norm", "-3"], check=True)
    for name, spec in farfield.ROOMS.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        text, _ = farfield.scene_text(spec, voices)
        with open(os.path.join(d, "room.scene"), "w") as f:
            f.write(text)
        subprocess.run([tool, os.path.join(d, "room.scene"), "--render", os.path.join(d, "mics.wav")], check=True, capture_output=True)
        clean = "\n".join(l for l in text.split("\n") if not l.startswith("noise")) + "\n"
        with open(os.path.join(d, "clean.scene"), "w") as f:
            f.write(clean)
        subprocess.run([tool, os.path.join(d, "clean.scene"), "--render", os.path.join(d, "clean.wav")], check=True, capture_output=True)
        print(name, "rendered into", d)


if __name__ == "__main__":
    main()

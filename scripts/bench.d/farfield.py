#!/usr/bin/env python3
"""scripts/bench farfield: the room as a listener at the far end hears it (see farfield.sh).

  farfield.py prepare WORK BIN VOICES_DIR   write every room's scene and room file (those in
                                            $FARFIELD_ROOMS when set), render them;
                                            prints "NAME SECONDS FAR_END_WAV|-" per room
  farfield.py xruns ROOMDIR                 xruns and device losses of the room's roomd run
  farfield.py analyze WORK VOICES_DIR NAME...  metric lines, one JSON object per line
  farfield.py windows KEEP NAME [SECONDS]   STOI of roomd, mic 0 and the anchors over consecutive
                                            windows of the talk (0.75 s), from a FARFIELD_KEEP
                                            directory: where in the talk a room is won or lost
  farfield.py bands KEEP NAME [hpf]         STOI of each in each of its 15 third-octave bands
                                            (150 Hz-3.8 kHz): where in frequency; with "hpf" the
                                            others also through webrtc's high-pass, as roomd's
                                            output is

Rooms: people 0.8-3 m from board/sim's 4-mic array in shoebox rooms with RT60 0.3-0.8 s and
ventilation, fan or diffuse noise at 12-25 dB SNR; one talker, two taking turns, one walking,
and one talking while the far end plays (double talk). Voices: English and German, male and
female (espeak-ng). Per room, side by side from one run of the scene:
  roomd     what roomd sends (its cleaned capture, --record), real time on the sim card;
  mic0      the raw microphone 0 (the scene's rendering; with the far end's echo added offline
            in the double-talk room: the far end through the card's speaker responses);
  das, mvdr, wpe_mvdr  offline anchors on the four echo-free mics that know the talker's true
            position (non-causal, upper references, not products): delay-and-sum; MVDR with the
            noise's own covariance (the scene rendered without talkers) and the true near-field
            steering vector; nara_wpe's offline WPE (10 taps, delay 3, 3 iterations) then that
            MVDR. With two talkers the active one's steering (from the dry signals); with a
            walking talker the steering follows the path.
PESQ-WB (P.862.2) and STOI at 16 kHz against the dry talker(s), each output time-aligned by
cross-correlation, over the talk (first to last active sample of the dry reference).
"""
import json
import math
import os
import subprocess
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_analysis import disturbances, lines  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doubletalk import lag_of, to16k as mono_to16k  # noqa: E402  (the same decimator and alignment)

RATE = 48000
C = 343.0
MICS = np.array([[0.032, 0, 0], [0, 0.032, 0], [-0.032, 0, 0], [0, -0.032, 0]])  # board/sim
SPEAKER = (0.0, 0.0, -0.05)  # under the array's centre
ECHO_GAIN_DB = -24           # the speaker's level: its direct path at the mics ~0 dB re the far-end file
DT_LEAD_S = 6.0              # the far end talks alone this long before the near-end talker starts

# name: room size, RT60 s, array centre, talkers [(voice, azimuth deg, distance m, height m, start s)],
# noise (kind, position or "diffuse", SNR dB), walk (azimuth from, to, over seconds) or None, far end
ROOMS = {
    "near-0.8m": dict(room=(5.0, 4.0, 2.7), rt60=0.3, array=(2.5, 2.0, 0.75),
                      talkers=[("ff_en_m", 40, 0.8, 1.15, 0.5)], noise=("vent", (0.4, 0.4, 2.6), 25)),
    "mid-1.6m": dict(room=(6.0, 4.5, 2.8), rt60=0.45, array=(3.0, 2.2, 0.75),
                     talkers=[("ff_en_f", 160, 1.6, 1.2, 0.5)], noise=("vent", (5.6, 0.4, 2.7), 20)),
    "far-2.4m": dict(room=(8.0, 5.0, 3.0), rt60=0.7, array=(4.0, 2.5, 0.75),
                     talkers=[("ff_de_m", -100, 2.4, 1.2, 0.5)], noise=("fan", (7.5, 4.5, 0.4), 12)),
    "far-3m": dict(room=(9.0, 6.0, 3.2), rt60=0.8, array=(4.5, 3.0, 0.75),
                   talkers=[("ff_de_f", 10, 3.0, 1.25, 0.5)], noise=("pink", "diffuse", 15)),
    "turns": dict(room=(6.0, 5.0, 2.8), rt60=0.5, array=(3.0, 2.5, 0.75),
                  talkers=[("ff_en_m", 60, 1.2, 1.2, 0.5), ("ff_de_f", -120, 2.2, 1.2, 9.5)],
                  noise=("vent", (0.5, 4.5, 2.7), 18)),
    "walking": dict(room=(6.0, 5.0, 2.8), rt60=0.4, array=(3.0, 2.5, 0.75),
                    talkers=[("ff_en_f", 0, 1.5, 1.6, 0.5)], walk=(0, 120), noise=("pink", "diffuse", 22)),
    "doubletalk": dict(room=(6.0, 4.5, 2.8), rt60=0.5, array=(3.0, 2.2, 0.75),
                       talkers=[("ff_de_m", -150, 1.5, 1.2, DT_LEAD_S)], noise=("vent", (5.6, 4.1, 2.7), 20),
                       far="ff_far_en"),
}


def mic_gains_db():
    """$FARFIELD_MIC_GAINS_DB: mics 1-3's sensitivity against mic 0's in dB (real MEMS mics differ by up
    to ±1 dB); mic 0 stays the reference, as the double-talk room's offline echo and the scores assume."""
    text = os.environ.get("FARFIELD_MIC_GAINS_DB", "").split()
    try:
        gains = [float(g) for g in text]
    except ValueError:
        sys.exit(f"farfield: FARFIELD_MIC_GAINS_DB={' '.join(text)!r}: numbers in dB, one per mic 1-{len(MICS) - 1}")
    if len(gains) > len(MICS) - 1 or any(abs(g) > 20 for g in gains):
        sys.exit(f"farfield: FARFIELD_MIC_GAINS_DB: at most {len(MICS) - 1} values (mics 1-{len(MICS) - 1}), each within ±20 dB")
    return gains


def emit(metric, value, unit, **extra):
    line = {"bench": "farfield", "metric": metric, "value": None if value is None else round(float(value), 3), "unit": unit}
    line.update(extra)
    print(json.dumps(line), flush=True)


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getframerate() == RATE, path
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64) / 32768.0
        return x.reshape(-1, w.getnchannels())


def place(spec, az, dist, height):
    """Absolute position of a talker at azimuth `az` (board frame), `dist` m from the array centre."""
    ax, ay, az0 = spec["array"]
    dz = height - az0
    horizontal = math.sqrt(max(dist * dist - dz * dz, 0.01))
    return (ax + horizontal * math.cos(math.radians(az)), ay + horizontal * math.sin(math.radians(az)), height)


def voice_seconds(voices, voice):
    with wave.open(os.path.join(voices, voice + ".wav"), "rb") as w:
        return w.getnframes() / w.getframerate()


def scene_text(spec, voices, with_talkers=True):
    r, a = spec["room"], spec["array"]
    out = [f"room = {r[0]} {r[1]} {r[2]}", f"rt60_ms = {spec['rt60'] * 1000:.0f}", f"array = {a[0]} {a[1]} {a[2]}"]
    out += [f"mic{m} = {x} {y} {z}" for m, (x, y, z) in enumerate(MICS)]
    out += [f"mic{m + 1}_gain_db = {g}" for m, g in enumerate(mic_gains_db())]
    out.append(f"speaker = {SPEAKER[0]} {SPEAKER[1]} {SPEAKER[2]}")
    end = 0.0
    for i, (voice, az, dist, height, start) in enumerate(spec["talkers"]):
        n = i + 1
        seconds = voice_seconds(voices, voice)
        end = max(end, start + seconds)
        if with_talkers:
            out.append(f"talker{n} = {os.path.join(voices, voice + '.wav')}")
            out.append(f"talker{n}_start_s = {start}")
        if "walk" in spec:
            a0, a1 = spec["walk"]
            p0, p1 = place(spec, a0, dist, height), place(spec, a1, dist, height)
            mid = place(spec, (a0 + a1) / 2, dist, height)  # along the circle, not across it
            t0, t1 = start + 0.5, start + seconds - 0.5
            pts = [(p0, t0), (mid, (t0 + t1) / 2), (p1, t1)]
            if with_talkers:
                out.append(f"talker{n}_path = " + "; ".join(f"{p[0]:.3f} {p[1]:.3f} {p[2]:.3f} @ {t:.2f}" for p, t in pts))
        elif with_talkers:
            p = place(spec, az, dist, height)
            out.append(f"talker{n}_at = {p[0]:.3f} {p[1]:.3f} {p[2]:.3f}")
    kind, at, snr = spec["noise"]
    out.append(f"noise1 = {kind}")
    out.append("noise1_at = diffuse" if at == "diffuse" else f"noise1_at = {at[0]} {at[1]} {at[2]}")
    if with_talkers:
        out.append(f"noise1_snr_db = {snr}")
    out.append(f"duration_s = {end + 1.5:.2f}")
    return "\n".join(out) + "\n", end + 1.5


def prepare(work, bin_dir, voices):
    tool = os.path.join(bin_dir, "roomsim-scene")
    selected = os.environ.get("FARFIELD_ROOMS", "").split()
    for name, spec in ROOMS.items():
        if selected and name not in selected:
            continue
        d = os.path.join(work, "ff-" + name)
        os.makedirs(d, exist_ok=True)
        text, seconds = scene_text(spec, voices)
        with open(os.path.join(d, "room.scene"), "w") as f:
            f.write(text)
        # into the cache the card reads (rendered now, not while roomd runs; the analysis reads
        # the raw mics from there too), with the responses and the rendered levels
        info = json.loads(subprocess.run([tool, os.path.join(d, "room.scene"), "--irs", os.path.join(d, "irs")],
                                         check=True, capture_output=True, text=True).stdout)
        os.symlink(info["rendered"], os.path.join(d, "mics.wav"))
        # the same room with the noise alone, at the level the full scene gave it (for MVDR)
        noise_text, _ = scene_text(spec, voices, with_talkers=False)
        noise_text += f"noise1_dbfs = {info['noise_dbfs'][0]:.2f}\n"
        with open(os.path.join(d, "noise.scene"), "w") as f:
            f.write(noise_text)
        subprocess.run([tool, os.path.join(d, "noise.scene"), "--render", os.path.join(d, "noise.wav")],
                       check=True, capture_output=True)
        with open(os.path.join(d, "scene.json"), "w") as f:
            json.dump(info, f)
        with open(os.path.join(d, "room.conf"), "w") as f:
            f.write(f"scene = room.scene\necho = on\necho_delay_ms = 1.0\necho_gain_db = {ECHO_GAIN_DB}\n"
                    f"noise_dbfs = -75\nstatus = status.txt\n")
        far = os.path.join(voices, spec["far"] + ".wav") if "far" in spec else "-"
        print(name, f"{seconds + 1.0:.1f}", far)


def xruns(room_dir):
    return disturbances([os.path.join(room_dir, "roomd.jsonl")])


# ---- signal helpers ---------------------------------------------------------------------------

def to16k(x):
    """48 kHz -> 16 kHz (doubletalk.py's decimator), every column of a multi-channel signal."""
    if x.ndim == 2:
        return np.stack([mono_to16k(x[:, c]) for c in range(x.shape[1])], axis=1)
    return mono_to16k(x)


def aligned(ref, out, span):
    """ref and out (16 kHz) over span, out moved by its lag behind ref; and that lag."""
    lag = lag_of(out, ref, 8000)
    a, b = span
    b = min(b, len(out) - lag, len(ref))
    return ref[a:b], out[a + lag:b + lag], lag


def speech_level(r, o):
    """The level the far end hears: o's mean power over the 20 ms frames where the dry talker r
    talks (within 30 dB of its loudest frame), dBFS of a full-scale sine = 0 (P.56's idea, the
    activity taken from the reference rather than guessed from the output); r, o aligned."""
    n = 320
    frames = len(r) // n
    r, o = r[:frames * n].reshape(-1, n), o[:frames * n].reshape(-1, n)
    pr = np.mean(r ** 2, axis=1)
    talk = pr > np.max(pr) * 10 ** (-30 / 10)
    return 10 * math.log10(max(2 * float(np.mean(o[talk] ** 2)), 1e-20))


def scores(r, o):
    """PESQ-WB and STOI of `o` against `r` (16 kHz, aligned)."""
    from pesq import pesq
    from pystoi import stoi
    try:
        p = float(pesq(16000, r, o, "wb"))
    except Exception as e:  # no utterance found: nothing of the talker came through
        print(f"bench farfield: pesq failed: {e}", file=sys.stderr)
        p = 1.0
    return p, float(stoi(r, o, 16000, extended=False))


# ---- the offline anchors ----------------------------------------------------------------------

NFFT, HOP = 512, 128


def stft(x):
    """x: (samples, channels) -> (frames, bins, channels)."""
    win = np.hanning(NFFT + 1)[:NFFT]
    frames = 1 + (len(x) - NFFT) // HOP
    idx = np.arange(NFFT)[None, :] + HOP * np.arange(frames)[:, None]
    return np.fft.rfft(x[idx] * win[None, :, None], axis=1)


def istft(X, length):
    win = np.hanning(NFFT + 1)[:NFFT]
    frames = X.shape[0]
    y = np.zeros(HOP * (frames - 1) + NFFT)
    norm = np.zeros_like(y)
    chunks = np.fft.irfft(X, NFFT, axis=1)
    for t in range(frames):
        y[t * HOP:t * HOP + NFFT] += chunks[t] * win
        norm[t * HOP:t * HOP + NFFT] += win * win
    y /= np.maximum(norm, 1e-8)
    out = np.zeros(length)
    out[:min(length, len(y))] = y[:length]
    return out


def steering(pos, array):
    """Near-field steering vectors (bins, mics) for a source at pos, relative to mic 0."""
    mics = np.array(array)[None, :] + MICS
    d = np.linalg.norm(mics - np.array(pos)[None, :], axis=1)
    tau = (d - d[0]) / C
    f = np.fft.rfftfreq(NFFT, 1 / 16000)
    return np.exp(-2j * np.pi * f[:, None] * tau[None, :]) * (d[0] / d)[None, :]


def beamform(X, steer_per_frame, Rn=None):
    """X (frames, bins, mics); steer_per_frame (frames, bins, mics); Rn (bins, mics, mics) or None (DAS)."""
    if Rn is None:
        w = steer_per_frame / np.sum(np.abs(steer_per_frame) ** 2, axis=2, keepdims=True)
    else:
        Ri = np.linalg.inv(Rn)  # (bins, mics, mics)
        num = np.einsum("fij,tfj->tfi", Ri, steer_per_frame)
        den = np.einsum("tfi,tfi->tf", steer_per_frame.conj(), num)
        w = num / den[..., None]
    return np.einsum("tfi,tfi->tf", w.conj(), X)


def talker_steering(spec, refs16, frames):
    """Per STFT frame: the steering of the talker who is active (the louder dry signal), or along
    the walking talker's path."""
    per_talker = []
    for i, (voice, az, dist, height, start) in enumerate(spec["talkers"]):
        if "walk" in spec:
            a0, a1 = spec["walk"]
            seconds = len(refs16[i]) / 16000
            t0, t1 = start + 0.5, start + spec["_seconds"][i] - 0.5
            st = []
            for t in range(frames):
                time = (t * HOP + NFFT / 2) / 16000
                f = min(max((time - t0) / (t1 - t0), 0.0), 1.0)
                st.append(steering(place(spec, a0 + f * (a1 - a0), dist, height), spec["array"]))
            per_talker.append(np.array(st))
        else:
            per_talker.append(np.repeat(steering(place(spec, az, dist, height), spec["array"])[None], frames, axis=0))
    if len(per_talker) == 1:
        return per_talker[0]
    energy = []
    for r in refs16:
        e = np.array([np.sum(r[t * HOP:t * HOP + NFFT] ** 2) for t in range(frames)])
        energy.append(np.convolve(e, np.ones(32) / 32, mode="same"))
    who = np.argmax(np.array(energy), axis=0)
    return np.array([per_talker[who[t]][t] for t in range(frames)])


def anchors(spec, mics16, noise16, refs16):
    from nara_wpe.wpe import wpe
    X = stft(mics16)
    N = stft(noise16[:len(mics16)])
    frames = X.shape[0]
    Rn = np.einsum("tfi,tfj->fij", N, N.conj()) / N.shape[0]
    Rn += 1e-3 * np.trace(Rn, axis1=1, axis2=2)[:, None, None] / 4 * np.eye(4)[None]
    steer = talker_steering(spec, refs16, frames)
    out = {"das": istft(beamform(X, steer), len(mics16)),
           "mvdr": istft(beamform(X, steer, Rn), len(mics16))}
    Y = X.transpose(1, 2, 0)  # (bins, mics, frames) for nara_wpe
    Z = wpe(Y, taps=10, delay=3, iterations=3).transpose(2, 0, 1)
    out["wpe_mvdr"] = istft(beamform(Z, steer, Rn), len(mics16))
    return out


# ---- analysis ---------------------------------------------------------------------------------

class Room:
    """One room's run, read back: the dry talkers, the raw mics, what roomd sent, and the 16 kHz
    signals every score is taken over (`signals`: roomd, mic0 and the anchors)."""

    def __init__(self, work, voices, name):
        self.name = name
        self.spec = spec = dict(ROOMS[name])
        self.dir = d = os.path.join(work, "ff-" + name)
        mics = read_wav(os.path.join(d, "mics.wav"))
        noise = read_wav(os.path.join(d, "noise.wav"))
        self.refs = []
        spec["_seconds"] = []
        total = len(mics)
        for voice, az, dist, height, start in spec["talkers"]:
            x = read_wav(os.path.join(voices, voice + ".wav"))[:, 0]
            spec["_seconds"].append(len(x) / RATE)
            r = np.zeros(total)
            s = int(round(start * RATE))
            r[s:s + len(x)] = x[:max(0, total - s)]
            self.refs.append(r)
        self.raw0 = raw0 = mics[:, 0].copy()
        if "far" in spec:  # the far end's echo at mic 0, offline: the card's speaker response
            far = read_wav(os.path.join(voices, spec["far"] + ".wav"))[:, 0]
            h = read_float_wav(os.path.join(d, "irs", "speaker-mic0.wav"))
            echo = np.convolve(far, h)[:total] * 10 ** (ECHO_GAIN_DB / 20)
            raw0[:len(echo)] += echo[:total]
        self.rec = read_wav(os.path.join(d, "roomd.wav"))[:, 0]
        self.ref16 = to16k(np.sum(self.refs, axis=0))
        active = np.nonzero(np.abs(self.ref16) > 10 ** (-50 / 20))[0]
        self.span = (max(0, active[0] - 1600), min(len(self.ref16), active[-1] + 3200))
        self.signals = {"roomd": to16k(self.rec), "mic0": to16k(raw0)}
        self.signals.update(anchors(spec, to16k(mics), to16k(noise), [to16k(r) for r in self.refs]))


def analyze_room(work, voices, name):
    room = Room(work, voices, name)
    spec, d, refs, raw0, rec = room.spec, room.dir, room.refs, room.raw0, room.rec
    result = {"name": name, "xruns": xruns(d)}
    for label, sig in room.signals.items():
        r, o, lag = aligned(room.ref16, sig, room.span)
        result[label] = scores(r, o) + (lag,)
        if label in ("roomd", "mic0"):
            result["level_" + label] = speech_level(r, o)
    result["loc_median_deg"], result["lock_ms"], result["loc_samples"] = localization(spec, d, refs)
    # echo: the far end alone (before the near-end talker). roomd's figure is mic 0's energy
    # over its output's in the periods the far end plays (noise included in both); measured here
    # the same way from the outside — mic 0 rebuilt offline (the scene plus the far end through
    # the card's speaker response), roomd's recording — over 3 s to 5.8 s, and roomd's own over
    # the same window from its status lines' energies.
    if "far" in spec:
        a, b = int(3.0 * RATE), int((DT_LEAD_S - 0.2) * RATE)
        lag = result["roomd"][2] * 3
        mic_e = float(np.sum(raw0[a:b] ** 2))
        out_e = float(np.sum(rec[a + lag:b + lag] ** 2))
        result["erle"] = 10 * math.log10(mic_e / max(out_e, 1e-20))
        st = [l for l in lines(os.path.join(d, "roomd.jsonl")) if not l.get("summary") and "echo_in_energy" in l]
        first = next((l for l in st if l["t"] >= 3.0), None)
        last = next((l for l in reversed(st) if l["t"] <= DT_LEAD_S - 0.2), None)
        if first and last and last["echo_out_energy"] > first["echo_out_energy"]:
            result["erle_reported"] = 10 * math.log10((last["echo_in_energy"] - first["echo_in_energy"])
                                                      / (last["echo_out_energy"] - first["echo_out_energy"]))
        else:
            result["erle_reported"] = None
    return result


def wrap_deg(d):
    return (d + 180.0) % 360.0 - 180.0


def true_azimuth(spec, t):
    """The active talker's azimuth at scene time t: the latest to have started; along the path
    for the walking one."""
    talkers = spec["talkers"]
    if "walk" in spec:
        voice, az, dist, height, start = talkers[0]
        t0, t1 = start + 0.5, start + spec["_seconds"][0] - 0.5
        f = min(max((t - t0) / (t1 - t0), 0.0), 1.0)
        a0, a1 = spec["walk"]
        return a0 + f * (a1 - a0)
    current = talkers[0][1]
    for voice, az, dist, height, start in talkers:
        if t >= start:
            current = az
    return current


def localization(spec, d, refs):
    """Median error of roomd's reported direction while a talker talks, and the time from each
    talker's first word to the first report within 20 degrees of it (the worst over onsets)."""
    status = [l for l in lines(os.path.join(d, "roomd.jsonl")) if not l.get("summary") and "t" in l]
    errors = []
    for l in status:
        t = l["t"]
        i = int(t * RATE)
        talking = any(i < len(r) and np.max(np.abs(r[max(0, i - 2400):i + 2400]), initial=0) > 10 ** (-40 / 20) for r in refs)
        if talking and l.get("talker_locked") and l.get("talker_azimuth_deg") is not None:
            errors.append(abs(wrap_deg(l["talker_azimuth_deg"] - true_azimuth(spec, t))))
    locks = []
    for r, (voice, az, dist, height, start) in zip(refs, spec["talkers"]):
        onset = np.nonzero(np.abs(r) > 10 ** (-40 / 20))[0][0] / RATE
        hit = next((l["t"] for l in status if l["t"] >= onset and l.get("talker_azimuth_deg") is not None
                    and abs(wrap_deg(l["talker_azimuth_deg"] - true_azimuth(spec, l["t"]))) <= 20), None)
        locks.append((hit - onset) * 1000 if hit is not None else None)
    median = float(np.median(errors)) if errors else None
    lock = None if any(x is None for x in locks) else max(locks)
    return median, lock, len(errors)


def kept_talks(keep, name, hpf=False):
    """A FARFIELD_KEEP directory's room read back: the room, and per signal (roomd, mic 0, the
    anchors) the dry reference and the signal aligned to it over the talk. With hpf, all but
    roomd's go through webrtc's high-pass first, as roomd's output has."""
    from scipy.signal import lfilter
    room = Room(keep, keep, name)
    talks = {}
    for label, sig in room.signals.items():
        if hpf and label != "roomd":
            sig = lfilter(HPF_B, HPF_A, sig)
        talks[label] = aligned(room.ref16, sig, room.span)[:2]
    return room, talks


def windows(keep, name, seconds):
    """STOI of every signal over consecutive windows of the talk (where in the talk a room is
    won or lost), from a FARFIELD_KEEP directory."""
    from pystoi import stoi
    room, talks = kept_talks(keep, name)
    a, b = room.span
    n = int(seconds * 16000)
    print(f"{'from s':>7}" + "".join(f"{label:>10}" for label in talks))
    for start in range(0, b - a - n // 2, n):
        row = []
        for r, o in talks.values():
            rr, oo = r[start:start + n], o[start:start + n]
            # pystoi needs ~0.41 s (30 frames at 10 kHz): a last window under 0.45 s is left out
            row.append(stoi(rr, oo, 16000) if len(rr) >= min(n, 7200) else float("nan"))
        print(f"{(a + start) / 16000:7.2f}" + "".join(f"{v:10.3f}" for v in row))


# webrtc-audio-processing's high-pass at 16 kHz (its Q12 biquad: 4012, -8024, 4012; 8002, -3913),
# which roomd's chain runs and the anchors, being linear filters of the mics, do not
HPF_B = np.array([4012, -8024, 4012]) / 4096.0
HPF_A = np.array([1, -8002 / 4096.0, 3913 / 4096.0])


def stoi_bands(x, y):
    """pystoi's STOI of y against x (16 kHz, aligned), kept per third-octave band: the mean over
    its 384 ms segments of the envelope correlation in each of the 15 bands (their mean is STOI),
    and the bands' centre frequencies. pystoi's own steps, from its module; checked against its
    stoi() every call, so a pystoi that computes differently is named, not misread."""
    from pystoi import stoi, utils
    from pystoi.stoi import FS, N_FRAME, NFFT, NUMBAND, MINFREQ, OBM, N, BETA, DYN_RANGE
    whole = stoi(x, y, 16000)
    x, y = utils.resample_oct(x, FS, 16000), utils.resample_oct(y, FS, 16000)
    x, y = utils.remove_silent_frames(x, y, DYN_RANGE, N_FRAME, int(N_FRAME / 2))
    xt = np.sqrt(OBM @ np.abs(utils.stft(x, N_FRAME, NFFT, overlap=2).transpose()) ** 2)
    yt = np.sqrt(OBM @ np.abs(utils.stft(y, N_FRAME, NFFT, overlap=2).transpose()) ** 2)
    if xt.shape[1] < N:
        sys.exit(f"bench farfield: bands: under {N} frames of talk after pystoi drops the silent ones")
    xs = np.array([xt[:, m - N:m] for m in range(N, xt.shape[1] + 1)])
    ys = np.array([yt[:, m - N:m] for m in range(N, xt.shape[1] + 1)])
    scale = np.linalg.norm(xs, axis=2, keepdims=True) / (np.linalg.norm(ys, axis=2, keepdims=True) + utils.EPS)
    yp = np.minimum(ys * scale, xs * (1 + 10 ** (-BETA / 20)))
    yp -= yp.mean(axis=2, keepdims=True)
    xs -= xs.mean(axis=2, keepdims=True)
    yp /= np.linalg.norm(yp, axis=2, keepdims=True) + utils.EPS
    xs /= np.linalg.norm(xs, axis=2, keepdims=True) + utils.EPS
    per_band = np.mean(np.sum(yp * xs, axis=2), axis=0)
    if abs(np.mean(per_band) - whole) > 1e-6:
        sys.exit(f"bench farfield: bands: the bands' mean {np.mean(per_band):.4f} is not pystoi's {whole:.4f} "
                 "(another pystoi version?)")
    return per_band, utils.thirdoct(FS, NFFT, NUMBAND, MINFREQ)[1]


def bands(keep, name, hpf):
    """STOI per third-octave band of every signal, from a FARFIELD_KEEP directory: where in
    frequency a room is won or lost. With hpf, mic 0 and the anchors go through webrtc's
    high-pass first, as roomd's output has."""
    per = {}
    for label, (r, o) in kept_talks(keep, name, hpf)[1].items():
        per[label], centres = stoi_bands(r, o)
    print(f"{'band Hz':>7}" + "".join(f"{label:>10}" for label in per))
    for b, centre in enumerate(centres):
        print(f"{centre:7.0f}" + "".join(f"{v[b]:10.3f}" for v in per.values()))
    print(f"{'STOI':>7}" + "".join(f"{np.mean(v):10.3f}" for v in per.values()))


def read_float_wav(path):
    import scipy.io.wavfile as wavfile
    rate, x = wavfile.read(path)
    assert rate == RATE, path
    return x.astype(np.float64)


def analyze(work, voices, names):
    rooms = [analyze_room(work, voices, n) for n in names]
    labels = ["roomd", "mic0", "das", "mvdr", "wpe_mvdr"]
    for r in rooms:
        for label in labels:
            p, s, lag = r[label]
            emit(f"farfield.pesq_{label}", p, "MOS-LQO", room=r["name"], xruns=r["xruns"])
            emit(f"farfield.stoi_{label}", s, "", room=r["name"])
        emit("farfield.level_dbfs", r["level_roomd"], "dBFS", room=r["name"], mic0_dbfs=round(r["level_mic0"], 2),
             measure="what roomd sends while the talker talks (20 ms frames within 30 dB of the dry talker's loudest), mean power, dBFS of a full-scale sine; mic0_dbfs: raw mic 0 the same way")
        emit("farfield.localization_median_deg", r["loc_median_deg"], "degrees", room=r["name"], samples=r["loc_samples"],
             measure="|reported - true azimuth| over roomd's 50 ms status lines while a talker talks and the direction is locked")
        emit("farfield.lock_ms", r["lock_ms"], "ms", room=r["name"],
             measure="from a talker's first word to the first status line within 20 degrees of it (worst onset; 50 ms lines)")
        if "erle" in r:
            emit("farfield.erle_db", r["erle"], "dB", room=r["name"], reported_db=r["erle_reported"] and round(r["erle_reported"], 2),
                 measure="far end alone, 3 s to 5.8 s: mic 0 (rebuilt offline) over roomd's recorded output; reported_db: roomd's status-line energies over the same window")
    for label in labels:
        emit(f"farfield.pesq_{label}", np.mean([r[label][0] for r in rooms]), "MOS-LQO", room="mean", rooms=len(rooms))
        emit(f"farfield.stoi_{label}", np.mean([r[label][1] for r in rooms]), "", room="mean", rooms=len(rooms))
    levels = [r["level_roomd"] for r in rooms]
    emit("farfield.level_spread_db", max(levels) - min(levels), "dB", room="max", rooms=len(rooms),
         mic0_db=round(max(r["level_mic0"] for r in rooms) - min(r["level_mic0"] for r in rooms), 2),
         measure="loudest room's farfield.level_dbfs minus the quietest's: how much louder the near talker reaches the far end than the farthest")
    locs = [r["loc_median_deg"] for r in rooms if r["loc_median_deg"] is not None]
    emit("farfield.localization_median_deg", max(locs) if locs else None, "degrees", room="max", rooms=len(locs))
    lk = [r["lock_ms"] for r in rooms]
    emit("farfield.lock_ms", None if any(x is None for x in lk) else max(lk), "ms", room="max", rooms=len(lk))
    print(f"{'room':12} {'':>12}" + "".join(f"{l:>14}" for l in labels) + "   loc deg  lock ms", file=sys.stderr)
    for r in rooms:
        loc = "-" if r["loc_median_deg"] is None else f"{r['loc_median_deg']:.1f}"
        lock = "-" if r["lock_ms"] is None else f"{r['lock_ms']:.0f}"
        print(f"{r['name']:12} {'PESQ / STOI':>12}" + "".join(f"{r[l][0]:>8.2f} /{r[l][1]:.2f}" for l in labels)
              + f"   {loc:>7}  {lock:>7}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 3 and sys.argv[1] == "xruns":
        print(xruns(sys.argv[2]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "analyze":
        analyze(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "windows":
        windows(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) == 5 else 0.75)
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "bands" and sys.argv[4:] in ([], ["hpf"]):
        bands(sys.argv[2], sys.argv[3], len(sys.argv) == 5)
    else:
        sys.exit(__doc__)

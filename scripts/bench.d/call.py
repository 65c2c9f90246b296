"""scripts/bench call: the call's timeline (prepare) and PESQ-WB of what each end heard (analyze).

prepare WORK NEAR.wav FAR.wav: writes WORK/near-timeline.wav (roomd's talker from 3 s) and
WORK/far-timeline.wav (the caller's talker, from the moment the near talker has finished plus
a second, counted from the call's start: roomd answers at once), and WORK/timeline.json.

analyze WORK CODEC...: for each codec, PESQ-WB (P.862.2, 16 kHz) of
  - call.pesq_caller_hears_<codec>: baresip's decoder output against roomd's clean talker,
  - call.pesq_appliance_plays_<codec>: roomd's speaker against the caller's clean talker,
  - call.pesq_anchor_<codec>: the anchor's callee (baresip) against the caller's talker,
each recording aligned to its talker by cross-correlation first.

m2e-timeline WORK MARKS.wav: the mouth-to-ear calls' two mic inputs, WORK/m2e-callee.wav (the
mark train from 4 s) and WORK/m2e-caller.wav (the same train from 18 s, after the callee's),
and WORK/m2e.json.

m2e WORK CODEC...: sip.mouth_to_ear_ms (roomd <-> baresip, both directions) and
sip.anchor_mouth_to_ear_ms (baresip <-> baresip), per codec, from the m2e calls: both ends on
the simulated card, so the marks' onsets at one end's mic and the other end's speaker are on one
clock (scripts/bench_analysis.py mouth_to_ear, the e2e and baresip benches' measure); and what
roomd in that call costs (call.cpu_pct_call_alone, call.rss_mb_call_alone).

cost WORK: call.cpu_pct_room_and_call / call.rss_mb_room_and_call (A in the bridged call: in the
room and in the call at once) beside call.cpu_pct_room_alone / call.rss_mb_room_alone (B, in the
same room without a call, over the same window).
"""
import json
import os
import re
import sys

import numpy as np
from pesq import pesq
from scipy.signal import fftconvolve, resample_poly

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench_analysis  # noqa: E402
from quality import read_wav, write_wav  # noqa: E402  (the quality bench's WAV helpers)

LEAD_S = 3.0
GAP_S = 1.0


def to16k(rate, x):
    return x if rate == 16000 else resample_poly(x, 16000, rate)


def emit(metric, value, unit, **extra):
    bench_analysis.emit("call", metric, float(value), unit, **extra)


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


M2E_CALLEE_AT_S = 4.0   # the callee's marks from here on its mic (roomd's mic runs ~1.5 s before the call)
M2E_CALLER_AT_S = 18.0  # the caller's after the callee's last (15.4 s) and its tail
M2E_TRAIN_S = 12.0      # the mark train without its continuous part (19 marks, 600 ms apart)
M2E_WINDOW_MS = 500     # a mark is looked for this long after it was spoken (the baresip bench's)


def m2e_timeline(work, marks_path):
    rate, marks = read_wav(marks_path)
    train = marks[:int(M2E_TRAIN_S * rate)]
    total = int((M2E_CALLER_AT_S + M2E_TRAIN_S + 3) * rate)
    for name, at in (("callee", M2E_CALLEE_AT_S), ("caller", M2E_CALLER_AT_S)):
        line = np.zeros(total)
        start = int(at * rate)
        line[start:start + len(train)] = train
        write_wav(f"{work}/m2e-{name}.wav", rate, line)
    with open(f"{work}/m2e.json", "w") as f:
        json.dump({"seconds": int(total / rate + 1)}, f)


def card_streams(status, who):
    """Period and buffer (frames) of one end's simulated card streams, and their xruns."""
    out = {}
    for stream in ("capture", "playback"):
        f = bench_analysis.status_fields(status, stream)
        if f:
            out[f"{who}_{stream}"] = f"rate {f['rate']} period {f['period']} buffer {f['buffer']} ch {f['channels']} starts {f['starts']} xruns {f['xruns']}"
    return out


def call_stream(stats_path):
    """The call's jitter buffer as `roomctl --json stats` saw it during the caller's turn."""
    try:
        with open(stats_path) as f:
            streams = json.load(f)["result"]["streams"]
    except Exception:
        return {}
    if not streams:
        return {}
    s = max(streams, key=lambda r: r.get("received", 0))
    return {"roomd_jitter_buffer": {k: s.get(k) for k in ("delay_ms", "target_ms", "jitter_ms", "received", "late", "plc")}}


def baresip_buffers(log):
    """baresip's receive side as its `audio_debug` printed it in the middle of the turn it heard
    (five readings 0.25 s apart): the audio buffer between its decoder and its player (ms held:
    the least and the most read) and the jitter buffer (frames: its minimum, now, its maximum)."""
    try:
        with open(log, errors="replace") as f:
            text = f.read()
    except OSError:
        return {}
    held = [float(m.group(1)) for m in re.finditer(r"\n rx:.*\n\s*aubuf:.*\(cur ([0-9.]+)ms", text)]
    jbuf = sorted(set(re.findall(r"jitter buffer debug.*\n\s*running=\d+ (min=\d+ cur=\d+ max=\d+)", text)))
    out = {}
    if held:
        out["baresip_rx_aubuf_ms"] = [min(held), max(held)]
        out["baresip_rx_aubuf_readings"] = len(held)
    if jbuf:
        out["baresip_jbuf_frames"] = jbuf
    return out


def m2e(work, codecs):
    for codec in codecs:
        for leg, metric, callee_name in (("m2e-roomd", "sip.mouth_to_ear_ms", "roomd"),
                                         ("m2e-anchor", "sip.anchor_mouth_to_ear_ms", "baresip"),
                                         ("m2e-pair", "sip.pair_mouth_to_ear_ms", "pair")):
            d = f"{work}/{codec}/{leg}"
            if not os.path.isdir(d):
                continue
            callee, caller = f"{d}/callee", f"{d}/caller"
            streams = {**card_streams(f"{callee}.status", "callee"), **card_streams(f"{caller}.status", "caller")}
            xruns, late, lead = bench_analysis.playback_health([f"{callee}.status", f"{caller}.status"])
            names = ("roomd_to_baresip", "baresip_to_roomd") if callee_name == "roomd" else ("callee_to_caller", "caller_to_callee")
            for talker, listener, direction in ((callee, caller, names[0]), (caller, callee, names[1])):
                try:
                    delays, sent = bench_analysis.mouth_to_ear(f"{work}/m2e-{os.path.basename(talker)}.wav", f"{talker}.status",
                                                               f"{listener}-speaker.wav", f"{listener}.status", window_ms=M2E_WINDOW_MS)
                except (OSError, SystemExit, StopIteration) as e:
                    emit(metric, float("nan"), "ms", codec=codec, direction=direction, error=str(e)[:200])
                    continue
                if callee_name == "pair":
                    extra = call_stream(f"{listener}-stats.json")
                elif listener == callee and callee_name == "roomd":
                    extra = call_stream(f"{d}/stats.json")
                else:
                    extra = baresip_buffers(f"{d}/{'far' if callee_name == 'roomd' else ('a' if listener == caller else 'b')}/baresip.log")
                pb = bench_analysis.status_fields(f"{listener}.status", "playback")
                extra["listener_playback_restarted"] = pb.get("start_ns") != pb.get("first_start_ns")
                if len(delays) < 5:
                    emit(metric, float("nan"), "ms", codec=codec, direction=direction, marks=len(delays), sent=len(sent),
                         error=f"only {len(delays)} marks heard of {len(sent)}")
                    continue
                emit(metric, delays[len(delays) // 2], "ms", codec=codec, direction=direction, marks=len(delays), sent=len(sent),
                     p10=round(delays[int(len(delays) * 0.1)], 2), p90=round(delays[int(len(delays) * 0.9)], 2),
                     min=round(delays[0], 2), max=round(delays[-1], 2), xruns=xruns, late_writes=late, min_lead_ms=lead,
                     **streams, **extra)
            cpu_path = f"{d}/cpu.json"
            if callee_name == "roomd" and os.path.exists(cpu_path):
                with open(cpu_path) as f:
                    use = json.load(f)
                window = f"{use['window_s']:.1f} s of the call (both turns), /proc/PID/stat utime+stime; RSS: VmRSS at its end"
                emit("call.cpu_pct_call_alone", use["roomd"]["cpu_pct"], "%", codec=codec, window=window,
                     baresip_cpu_pct=round(use["baresip"]["cpu_pct"], 2), what="roomd in a SIP call, no room; baresip: the caller, same window")
                emit("call.rss_mb_call_alone", use["roomd"]["rss_mb"], "MB", codec=codec, baresip_rss_mb=round(use["baresip"]["rss_mb"], 2))


def cost(work):
    with open(f"{work}/cpu.json") as f:
        use = json.load(f)
    window = f"{use['window_s']:.1f} s from the bridge on (all three turns), /proc/PID/stat utime+stime; RSS: VmRSS at its end"
    emit("call.cpu_pct_room_and_call", use["A"]["cpu_pct"], "%", window=window,
         minus_room_alone=round(use["A"]["cpu_pct"] - use["B"]["cpu_pct"], 2),
         what="roomd A: a streamer in a roomserver room with B and the SIP caller bridged in (Opus)")
    emit("call.cpu_pct_room_alone", use["B"]["cpu_pct"], "%", window=window,
         what="roomd B: a streamer in the same room, no call, the same window")
    emit("call.rss_mb_room_and_call", use["A"]["rss_mb"], "MB", minus_room_alone=round(use["A"]["rss_mb"] - use["B"]["rss_mb"], 2),
         what="roomd A, in the room and in the call")
    emit("call.rss_mb_room_alone", use["B"]["rss_mb"], "MB", what="roomd B, in the same room, no call")


if __name__ == "__main__":
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "bridge-timeline":
        bridge_timeline(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    elif sys.argv[1] == "bridge":
        bridge(sys.argv[2])
    elif sys.argv[1] == "m2e-timeline":
        m2e_timeline(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "m2e":
        m2e(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "cost":
        cost(sys.argv[2])
    else:
        analyze(sys.argv[2], sys.argv[3:])

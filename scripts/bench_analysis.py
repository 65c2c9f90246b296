#!/usr/bin/env python3
"""Turns the raw output of scripts/bench runs (roomd --json lines, recorded WAVs) into metric
lines. Standard library only, so the bench needs nothing beyond python3."""
import array
import json
import math
import os
import subprocess
import sys
import tempfile
import wave


def emit(bench, metric, value, unit, **extra):
    line = {"bench": bench, "metric": metric, "value": round(value, 3), "unit": unit}
    # scripts/bench e2e runs the call encrypted and plain (BENCH_SRTP=yes/no, and the signalling
    # that went with it, BENCH_SIGNALLING=tls/plain).
    if os.environ.get("BENCH_SRTP") in ("yes", "no"):
        line["srtp"] = "on" if os.environ["BENCH_SRTP"] == "yes" else "off"
    if os.environ.get("BENCH_SIGNALLING") in ("tls", "plain"):
        line["signalling"] = os.environ["BENCH_SIGNALLING"]
    line.update(extra)
    print(json.dumps(line), flush=True)


def lines(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.startswith("{")]


def disturbances(paths):
    """xruns and device losses over the summaries of roomd runs' --json output: what tells a bench
    that the machine, not roomd, shaped a run, so that it runs the room again. A run without a
    summary (it did not finish) counts as 1000."""
    total = 0
    for path in paths:
        s = next((l for l in lines(path) if l.get("summary")), None) if os.path.exists(path) else None
        total += 1000 if s is None else s.get("capture_xruns", 0) + s.get("playback_xruns", 0) + s.get("device_losses", 0)
    return total


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, path
        data = array.array("h", w.readframes(w.getnframes()))
        return w.getframerate(), data


# One 16-bit LSB of quantization noise per sample, (1/32768)^2 / 12: the residual can never be
# smaller than what a 16-bit output can represent, so an output of digital silence does not
# turn into an infinite ERLE.
QUANTIZATION_ENERGY_PER_SAMPLE = (1 / 32768) ** 2 / 12
PERIOD_SAMPLES = 480


def echo_reduction(path):
    """ERLE over far-end-active periods after the first 5 s of far-end speech, and over the first 1 s."""
    status = [l for l in lines(path) if not l.get("summary")]
    base = next((l for l in status if l["far_end_periods"] >= 500), None)
    end = status[-1]
    if base is None or end["far_end_periods"] <= base["far_end_periods"]:
        sys.exit(f"bench aec: not enough far-end activity in {path} to measure ERLE")

    def ratio(a_in, a_out, periods):
        floor = periods * PERIOD_SAMPLES * QUANTIZATION_ENERGY_PER_SAMPLE
        return 10 * math.log10(a_in / max(a_out, floor))

    settled = ratio(end["echo_in_energy"] - base["echo_in_energy"], end["echo_out_energy"] - base["echo_out_energy"],
                    end["far_end_periods"] - base["far_end_periods"])
    early = next((l for l in status if l["far_end_periods"] >= 100), None)
    first = ratio(early["echo_in_energy"], early["echo_out_energy"], early["far_end_periods"]) if early else None
    return settled, first, f"far-end periods {base['far_end_periods']}..{end['far_end_periods']}"


def aec(work):
    erle, first, window = echo_reduction(f"{work}/echo.jsonl")
    emit("aec", "aec.erle_db", erle, "dB", board="sim", window=window + " (after 5 s of far-end speech)",
         config="HPF + the default canceller (roomd's own since issue 9; ROOMD_ECHO_CANCELLER=webrtc for webrtc's AEC), moderate suppression; NS, AGC, beamformer off; mic 0 vs output",
         canceller=os.environ.get("ROOMD_ECHO_CANCELLER") or "kalman (default)")
    if first is not None:
        emit("aec", "aec.erle_first_1s_db", first, "dB", board="sim")
    chain, _, window = echo_reduction(f"{work}/chain.jsonl")
    emit("aec", "chain.echo_reduction_db", chain, "dB", board="sim", window=window,
         config="full chain as board/sim runs it (HPF, AEC, NS, AGC, VAD; array.beamformer = no); residual floored at 16-bit quantization noise")

    # Double talk: how much of the near-end talker survives when the far end talks at once.
    # The same near-end input is cleaned once with far-end speech and once without; the
    # double-talk output is projected on the near-end-only output over the near-end window.
    rate, dt = read_wav(f"{work}/dt.wav")
    _, alone = read_wav(f"{work}/nearonly.wav")
    with wave.open(f"{work}/near.wav", "rb") as w:
        near_len = w.getnframes()
    start, stop = 10 * rate, min(10 * rate + near_len, len(dt), len(alone))
    cross = sum(dt[i] * alone[i] for i in range(start, stop))
    e_alone = sum(alone[i] * alone[i] for i in range(start, stop))
    e_dt = sum(dt[i] * dt[i] for i in range(start, stop))
    if e_alone <= 0 or e_dt <= 0:
        sys.exit("bench aec: no near-end speech in the recordings")
    gain = cross / e_alone
    emit("aec", "aec.doubletalk_near_loss_db", -20 * math.log10(max(gain, 1e-6)), "dB", board="sim",
         measure="near-end speech level lost during double talk: -20log10(<dt,alone>/<alone,alone>) over the near-end talk")
    emit("aec", "aec.doubletalk_corr", cross / math.sqrt(e_alone * e_dt), "ratio", board="sim",
         measure="correlation of the double-talk output with the near-end-only output over the near-end talk")


def engine(work):
    all_lines = lines(f"{work}/engine.jsonl")
    summary = next((l for l in all_lines if l.get("summary")), None)
    if summary is None:
        sys.exit("bench engine: roomd printed no summary")
    if not summary["alloc_probe"] or not summary["alloc_probe_verified"]:
        sys.exit("bench engine: the allocation probe was not loaded or did not count a test malloc")
    if summary["steady_periods"] < 500:
        sys.exit("bench engine: too few steady-state periods measured")
    emit("engine", "engine.allocs_per_frame", summary["steady_allocs"] / summary["steady_periods"], "allocs",
         board="sim", periods=summary["steady_periods"])
    dynamic = next((l for l in lines(f"{work}/engine-dynamic.jsonl") if l.get("summary")), None)
    if dynamic is None or not dynamic.get("retain_probe_verified"):
        sys.exit("bench engine: the probe did not count a test retain (swift_retain not interposed?)")
    emit("engine", "engine.retains_per_frame", dynamic["steady_retains"] / dynamic["steady_periods"], "retains",
         board="sim", periods=dynamic["steady_periods"],
         measure="swift_retain/swift_retain_n calls on the audio thread per steady-state period (LD_PRELOAD probe), "
                 "same code with the Swift runtime linked dynamically (the static one cannot be interposed)")
    emit("engine", "engine.cpu_pct", summary["cpu_pct"], "%", board="sim",
         config="board/sim: 48 kHz, 4 mics captured, APM on mic 0 (beamformer off), Opus 10 ms encode+decode (loopback), far-end playing")
    noarray = next((l for l in lines(f"{work}/engine-noarray.jsonl") if l.get("summary")), None)
    if noarray is not None:
        emit("engine", "engine.cpu_pct_no_array", noarray["cpu_pct"], "%", board="sim",
             measure="the same 20 s run right after, roomd --disable array (no talker direction)")
        emit("engine", "engine.array_cost_pct", round(summary["cpu_pct"] - noarray["cpu_pct"], 2), "%", board="sim",
             measure="engine.cpu_pct - engine.cpu_pct_no_array: roomd's array processing (finding the talker), "
                     "one pair of runs; run-to-run spread of engine.cpu_pct is ~1 point on this VM")
    # The simulated card's own work (input, noise, the room's echo convolution, conversions),
    # timed by the plugin around its transfers (CLOCK_MONOTONIC; they do not block): a board does
    # not pay it. Same run, over roomd's run time (the streams are open for all of it but start-up).
    sim_ns = 0
    with open(f"{work}/engine-main.status") as f:
        for line in f:
            if line.startswith(("capture ", "playback ")):
                sim_ns += int(next(x for x in line.split() if x.startswith("cpu_ns=")).split("=")[1])
    sim_pct = sim_ns / (summary["t"] * 1e9) * 100
    emit("engine", "engine.sim_cpu_pct", round(sim_pct, 2), "%", board="sim",
         measure="the simulated card's transfers (capture: input, noise, echo; playback: the echo-path convolution), "
                 "time in them measured by the plugin (status file cpu_ns, CLOCK_MONOTONIC), share of one core over roomd's run; "
                 "included in engine.cpu_pct")
    emit("engine", "engine.cpu_pct_without_sim", round(summary["cpu_pct"] - sim_pct, 2), "%", board="sim",
         measure="engine.cpu_pct minus engine.sim_cpu_pct: what a board's roomd would use, up to the sound card "
                 "driver's own cost (the plugin's pointer and poll callbacks, a few % of its share, stay counted)")
    # Resident memory while the engine runs: the last status line before the summary (the
    # summary's own figure is taken after the engine stopped and freed its buffers, which is not
    # what a call holds). docs/benchmarks.md, "Where roomd's memory goes in a call".
    running = [l for l in all_lines if not l.get("summary") and "rss_mb" in l]
    if not running:
        sys.exit("bench engine: no status line with rss_mb")
    last = running[-1]
    emit("engine", "roomd.rss_mb", last["rss_mb"], "MB", board="sim", t=last["t"],
         measure="VmRSS from the last status line of the 20 s run (engine running), not after it stopped; "
                 "includes the far-end feed ring (128 KiB: the file is read as it plays) and the sim card's mapped input WAV")
    if "rss_file_mb" in last:
        emit("engine", "roomd.rss_file_mb", last["rss_file_mb"], "MB", board="sim",
             measure="RssFile: clean pages of mapped files (roomd's code, libraries, the sim card's input WAV)")
        emit("engine", "roomd.rss_anon_mb", last["rss_anon_mb"], "MB", board="sim",
             measure="RssAnon: heap, stacks, relocated data; what only this process holds")
    if "rss_peak_mb" in summary:
        emit("engine", "roomd.rss_peak_mb", summary["rss_peak_mb"], "MB", board="sim",
             measure="VmHWM: the most roomd held at once, start-up included (start-up's file pages are given back 3 s in)")
    emit("engine", "engine.xruns", summary["capture_xruns"] + summary["playback_xruns"], "count", board="sim")


def selftest(work):
    runs = []
    for n in (1, 2, 3):
        with open(f"{work}/selftest-{n}.json") as f:
            answer = json.load(f)
        if not answer.get("ok"):
            sys.exit(f"bench selftest: run {n} refused: {answer}")
        runs.append(answer["result"])
    first = runs[0]
    if not first["passed"]:
        sys.exit(f"bench selftest: the sim board failed its self-test: {first['problems']}")
    delays = [m["delay_ms"] for m in first["mics"]]
    emit("selftest", "selftest.delay_ms", delays[0], "ms", board="sim",
         measure="speaker-to-mic delay of mic 0 (playback pre-fill + converters + air), cross-correlation with the sweep",
         all_mics=delays)
    emit("selftest", "selftest.snr_db_min", min(m["snr_db"] for m in first["mics"]), "dB", board="sim")
    emit("selftest", "selftest.echo_reduction_db", first["echo_reduction_db"], "dB", board="sim",
         measure="mic 0 vs the chain's output (canceller, HPF, NS; AGC held), last 1 s of the 1.5 s noise burst, first run after start-up",
         later_runs=[r["echo_reduction_db"] for r in runs[1:]])
    emit("selftest", "selftest.doubletalk_loss_db", first["doubletalk_loss_db"], "dB", board="sim",
         measure="test talker's level lost while the burst plays, against the same talker alone, first run",
         later_runs=[r["doubletalk_loss_db"] for r in runs[1:]])
    emit("selftest", "selftest.doubletalk_corr", first["doubletalk_corr"], "ratio", board="sim",
         measure="correlation of the double-talk output with the talker-alone output, first run",
         later_runs=[r["doubletalk_corr"] for r in runs[1:]], chopped_pct=[r["doubletalk_chopped_pct"] for r in runs])
    emit("selftest", "selftest.analysis_ms", max(r["analysis_ms"] for r in runs), "ms", board="sim",
         measure="SelfTestAnalysis on the event loop, worst of three runs (release, this machine)")


def make_marks(path, seconds=12.0, rate=48000, every=0.6, burst=0.1, continuous=10.0):
    """A mark train: speech-like bursts (harmonics of 150 Hz) of `burst` s every `every` s, so
    the VAD gate sends them and each has a sharp onset to time. (Where a mark starts within the
    talker's period does not matter: the chain delays every sample by the same amount — a
    sample early in a capture period waits longer for the period's end and plays that much
    earlier in the listener's period. What varies from run to run is the phase between the two
    appliances' period grids: 0-10 ms, fixed for a call.) Then `continuous` s of the same
    sound without pause, so a listener who joins then hears A at once (the join time must not
    include the wait for A's next mark: that wait was most of the old 227 ms)."""
    n = int((seconds + continuous) * rate)
    data = array.array("h", bytes(2 * n))

    def fill(start, count):
        for i in range(count):
            t = i / rate
            s = sum(math.sin(2 * math.pi * 150 * h * t) / h for h in range(1, 9))
            data[start + i] = int(max(-32767, min(32767, 9000 * s)))

    k = 0
    while True:
        start = int((0.5 + k * every) * rate)
        if start + int(burst * rate) >= int(seconds * rate):
            break
        fill(start, int(burst * rate))
        k += 1
    fill(int(seconds * rate), n - int(seconds * rate))
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(data.tobytes())


def onsets(samples, rate, threshold, min_gap):
    """Sample indices where the 1 ms energy first rises above `threshold` after `min_gap` s quiet."""
    block = rate // 1000
    found, last = [], -10 * rate
    for b in range(0, len(samples) - block, block):
        e = sum(x * x for x in samples[b:b + block]) / block
        if e > threshold and b - last > min_gap * rate:
            found.append(b)
        if e > threshold:
            last = b
    return found


def status_start(path, stream):
    start = status_fields(path, stream).get("first_start_ns")
    if start is None:
        sys.exit(f"bench e2e: no {stream} start in {path}")
    return int(start)


def status_fields(path, stream):
    """The key=value fields of one stream's line in a sim card status file ({} if absent)."""
    with open(path) as f:
        for line in f:
            if line.startswith(stream + " "):
                return dict(field.split("=", 1) for field in line.split()[1:] if "=" in field)
    return {}


def playback_health(paths):
    """xruns (either stream) and late playback writes over the given status files, and the
    smallest lead any playback write had over its play position (the headroom left)."""
    xruns = late = 0
    leads = []
    for path in paths:
        for stream in ("capture", "playback"):
            f = status_fields(path, stream)
            xruns += int(f.get("xruns", 0))
            if stream == "playback":
                late += int(f.get("late_writes", 0))
                if f.get("min_lead_us", "-") != "-":
                    leads.append(float(f["min_lead_us"]) / 1000)
    return xruns, late, (round(min(leads), 2) if leads else None)


E2E_PATH = "A's mic (sim card) -> APM -> Opus 10 ms -> RTP -> roomserver -> B's jitter buffer -> decoder -> B's speaker (sim card)"


def e2e(work, name="e2e", path=E2E_PATH):
    """The pair call's figures (scripts/bench pair_call) as `name`.*: e2e for roomserver, janus
    for the same call through a Janus AudioBridge."""
    delays, sent = mouth_to_ear(f"{work}/marks.wav", f"{work}/a.status", f"{work}/b-speaker.wav", f"{work}/b.status")
    if len(delays) < 5:
        sys.exit(f"bench {name}: only {len(delays)} marks heard of {len(sent)}")
    delays.sort()
    xruns, late, lead = playback_health([f"{work}/a.status", f"{work}/b.status"])
    emit(name, f"{name}.mouth_to_ear_ms", delays[len(delays) // 2], "ms", board="sim", marks=len(delays), sent=len(sent),
         p10=round(delays[int(len(delays) * 0.1)], 2), p90=round(delays[int(len(delays) * 0.9)], 2), xruns=xruns, late_writes=late, min_lead_ms=lead,
         path=path)
    # Memory in a call (issue 9's RSS goal is "in a call"): each roomd's last status line while
    # its engine runs; B listens, A talks (A's figure includes the sim card's mapped input file).
    rss = {}
    for side in ("a", "b"):
        status = [l for l in lines(f"{work}/{side}.jsonl") if "rss_mb" in l and not l.get("summary")]
        if status:
            rss[side] = status[-1]
    if rss:
        emit(name, f"{name}.rss_mb", max(v["rss_mb"] for v in rss.values()), "MB", board="sim",
             **{f"{k}_rss_mb": v["rss_mb"] for k, v in rss.items()},
             **{f"{k}_rss_file_mb": v.get("rss_file_mb") for k, v in rss.items()},
             **{f"{k}_rss_anon_mb": v.get("rss_anon_mb") for k, v in rss.items()},
             measure="resident memory of A (talker) and B (listener) in the call, last status line before they stop; value: the larger")
    # roomd's own CPU over the call (whole process: engine, network, SRTP), from each one's
    # summary line at exit.
    summaries = {side: next((l for l in lines(f"{work}/{side}.jsonl") if l.get("summary")), None) for side in ("a", "b")}
    if all(summaries.values()):
        emit(name, f"{name}.roomd_cpu_pct", summaries["a"]["cpu_pct"], "%", board="sim",
             a_cpu_pct=summaries["a"]["cpu_pct"], b_cpu_pct=summaries["b"]["cpu_pct"],
             measure="talker A's roomd, share of one core over its whole run (summary line); b_cpu_pct: the listener's")
    # Join: B's session start to the first audible sample at B's speaker.
    start = next(l["monotonic_ns"] for l in lines(f"{work}/b-join.jsonl") if l.get("event") == "room_session_start")
    rate, spk2 = read_wav(f"{work}/b2-speaker.wav")
    first = onsets(spk2, rate, 1e4, 0.0)
    if not first:
        sys.exit(f"bench {name}: the late joiner never heard anything")
    t_first = status_start(f"{work}/b2.status", "playback") + first[0] * 1e9 / rate
    emit(name, f"{name}.join_ms", (t_first - start) / 1e6, "ms", board="sim",
         measure="session start (TCP connect) to the first audible sample at the joiner's speaker, while A talks without pause")


def mouth_to_ear(marks_wav, talker_status, speaker_wav, listener_status, window_ms=300):
    """Per mark of the train spoken into the talker's simulated mic (its input file, from the
    capture stream's first start), the delay to its onset at the listener's simulated speaker
    (the output file, from the playback stream's first start), in ms, sorted; and the onsets
    of the marks sent. Also scripts/bench baresip's measure."""
    rate, mic = read_wav(marks_wav)
    _, spk = read_wav(speaker_wav)
    mic_start = status_start(talker_status, "capture")
    spk_start = status_start(listener_status, "playback")
    sent = onsets(mic, rate, 1e5, 0.3)
    heard = onsets(spk, rate, 1e4, 0.3)
    delays = []
    for idx in sent:
        t_sent = mic_start + idx * 1e9 / rate
        # the first onset at the listener within window_ms after the mark was spoken
        cands = [spk_start + j * 1e9 / rate - t_sent for j in heard]
        cands = [d for d in cands if 0 < d < window_ms * 1e6]
        if cands:
            delays.append(min(cands) / 1e6)
    return sorted(delays), sent


def binary(bin_dir):
    """Size of the shipped programs as the package installs them (stripped) and as built, and
    how many shared libraries each loads from outside Debian's library directories (the Swift
    toolchain's runtime, when it is linked dynamically): 0 means it runs on a board as is."""
    for program in ("roomd", "roomctl", "roomserver"):
        path = os.path.join(bin_dir, program)
        with tempfile.TemporaryDirectory() as tmp:
            stripped = os.path.join(tmp, program)
            subprocess.run(["strip", "-o", stripped, path], check=True)
            stripped_mb = os.path.getsize(stripped) / 1e6
        ldd = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
        foreign = [l.split("=>")[1].split()[0] for l in ldd.splitlines()
                   if "=>" in l and not l.split("=>")[1].strip().startswith(("/lib/", "/usr/lib/"))]
        emit("binary", f"{program}.binary_mb", stripped_mb, "MB", stripped=True,
             as_built_mb=round(os.path.getsize(path) / 1e6, 3))
        emit("binary", f"{program}.foreign_libs", len(foreign), "count",
             measure="shared libraries ldd resolves outside /lib and /usr/lib", libs=foreign)


def srtp_side_by_side(path, bench, metrics):
    """Encryption's cost: the same metric from an encrypted run and a plain run (lines carrying
    "srtp": "on" / "off" — scripts/bench pairs TLS signalling with SRTP and plain with plain —
    one run of each in `path`), as one line with both values; value is on minus off."""
    runs = {}
    for l in lines(path):
        if l.get("bench") == bench and l.get("srtp") in ("on", "off"):
            runs.setdefault(l["metric"], {})[l["srtp"]] = l["value"]
    for metric in metrics:
        for name, values in runs.items():
            if not name.startswith(metric) or "on" not in values or "off" not in values:
                continue
            on, off = values["on"], values["off"]
            emit(bench, f"{name}.encryption_cost", on - off, "%" if "pct" in name else ("MB" if name.endswith("_mb") else "ms"),
                 encrypted=on, plain=off, measure="TLS signalling + SRTP media minus plain signalling + plain RTP, same bench, same run of scripts/bench",
                 relative_pct=round((on - off) / off * 100, 1) if off else None)


def browser_round_trip(work):
    """scripts/bench janus, part 4: the marks A spoke, back at A's speaker through a browser that
    sends on what it hears (appliance -> Janus -> browser -> Janus -> appliance)."""
    delays, sent = mouth_to_ear(f"{work}/marks.wav", f"{work}/rt.status", f"{work}/rt-speaker.wav", f"{work}/rt.status", window_ms=1000)
    if len(delays) < 5:
        sys.exit(f"bench janus: only {len(delays)} marks came back through the browser of {len(sent)}")
    emit("janus", "janus.browser_round_trip_ms", delays[len(delays) // 2], "ms", board="sim", marks=len(delays), sent=len(sent),
         p10=round(delays[int(len(delays) * 0.1)], 2), p90=round(delays[int(len(delays) * 0.9)], 2),
         path="A's mic -> roomd -> Janus AudioBridge -> headless Chromium (WebRTC jitter buffer, decode, WebAudio, encode) -> Janus AudioBridge -> roomd -> A's speaker",
         measure="median over the marks; one way appliance -> browser is about half (the two legs are not the same)")


def backends(jsonl):
    """janus.X minus e2e.X for each figure both paths measured in one run (scripts/bench janus)."""
    values = {l["metric"]: l["value"] for l in lines(jsonl)}
    for metric in ("mouth_to_ear_ms", "join_ms", "roomd_cpu_pct", "rss_mb"):
        j, r = values.get(f"janus.{metric}"), values.get(f"e2e.{metric}")
        if j is None or r is None:
            continue
        emit("janus", f"janus.{metric}.vs_roomserver", j - r, "%" if "pct" in metric else ("MB" if metric.endswith("_mb") else "ms"),
             janus=j, roomserver=r, measure="the same call through a Janus AudioBridge minus through roomserver (TLS + SRTP), same run")


if __name__ == "__main__":
    if sys.argv[1] == "marks":
        make_marks(sys.argv[2])
    elif sys.argv[1] == "binary":
        binary(sys.argv[2])
    elif sys.argv[1] == "srtp-e2e":
        srtp_side_by_side(sys.argv[2], "e2e", ["e2e.mouth_to_ear_ms", "e2e.rss_mb", "e2e.roomd_cpu_pct", "e2e.join_ms"])
    elif sys.argv[1] == "browser-round-trip":
        browser_round_trip(sys.argv[2])
    elif sys.argv[1] == "backends":
        backends(sys.argv[2])
    elif sys.argv[1] == "srtp-server":
        srtp_side_by_side(sys.argv[2], "server", ["server.cpu_pct_", "server.p99_forward_ms", "server.p50_forward_ms"])
    else:
        {"aec": aec, "engine": engine, "selftest": selftest, "e2e": e2e}[sys.argv[1]](*sys.argv[2:])

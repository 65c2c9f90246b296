#!/usr/bin/env python3
"""scripts/bench janus-forward's load generator: Janus VideoRoom (forwarding) against Janus
AudioBridge (mixing), both with WebRTC peers, at the same room sizes, in one invocation.

  janus-forward.py run --backend videoroom|audiobridge --ws PORT --janus-pid PID
                       --rooms N --participants M [--streamers S] [--warmup 5] [--duration 20]
                       --speech FILE.wav [--room-base 20000]
  janus-forward.py compare FILE.jsonl   the two backends per point, and their cost lines

Every peer is an aiortc RTCPeerConnection (ICE, DTLS-SRTP, RTCP: what Janus spends on a
browser or an appliance), all in this one asyncio process, with no STUN server (host
candidates only; Janus's ICE is on the machine's non-loopback interface, scripts/janus-dev).

- videoroom: the first S of each room publish Opus (48 kHz, 20 ms frames, the speech looped
  from a per-peer offset) and each subscribes to the room's other S-1 publishers in one
  multistream PeerConnection; the others publish nothing and subscribe to all S. Janus
  forwards each publisher's packets to each subscriber: no decoding, no mixing, one SRTP
  protect and one send per copy. The appliance would decode and mix the streams itself.
- audiobridge: every peer joins the room with one sendrecv (talkers) or recvonly (the others,
  joined muted, as an audience appliance) PeerConnection and receives the room's mix: Janus
  decodes each talker, mixes and encodes once per listener.

Over the measured window it reads Janus's CPU (utime + stime, % of one core) and RSS, its own
CPU, and the audio frames every peer received, and prints JSON lines.
"""
import asyncio
import fractions
import importlib.util
import json
import math
import os
import random
import sys
import time
import wave

import av
import numpy
import websockets
from aiortc import MediaStreamTrack, RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

# /proc readers and the JSON-lines format: janus-load's (one definition each).
_spec = importlib.util.spec_from_file_location("janus_load", os.path.join(os.path.dirname(__file__), "janus-load.py"))
janus_load = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(janus_load)
janus_load.BENCH = "janus-forward"
cpu_seconds, rss_mb, emit = janus_load.cpu_seconds, janus_load.rss_mb, janus_load.emit

PLUGIN = {"videoroom": "janus.plugin.videoroom", "audiobridge": "janus.plugin.audiobridge"}
FRAME = 960  # 20 ms at 48 kHz


def speech_pcm(path):
    with wave.open(path) as w:
        if w.getframerate() != 48000 or w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise SystemExit("janus-forward: the speech must be 48 kHz mono 16-bit")
        pcm = w.readframes(w.getnframes())
    return pcm + b"\0" * 96000  # a second of silence between loops, as between sentences


class SpeechTrack(MediaStreamTrack):
    """The speech, looped from an offset, paced at one 20 ms frame per 20 ms."""
    kind = "audio"

    def __init__(self, pcm, offset):
        super().__init__()
        self.pcm, self.pos, self.pts, self.start = pcm, (offset * 2 * FRAME) % len(pcm), 0, None

    async def recv(self):
        if self.readyState != "live":
            raise MediaStreamError
        if self.start is None:
            self.start = time.monotonic()
        wait = self.start + self.pts / 48000 - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        end = self.pos + 2 * FRAME
        chunk = self.pcm[self.pos:end]
        self.pos = end if end + 2 * FRAME <= len(self.pcm) else 0
        frame = av.AudioFrame(format="s16", layout="mono", samples=FRAME)
        frame.planes[0].update(chunk)
        frame.sample_rate, frame.pts, frame.time_base = 48000, self.pts, fractions.Fraction(1, 48000)
        self.pts += FRAME
        return frame


class Janus:
    """Janus's WebSocket API: requests by transaction, the plugin's asynchronous events by handle."""

    def __init__(self, ws):
        self.ws, self.tx, self.pending = ws, 0, {}
        self.reader = asyncio.ensure_future(self.read())

    async def read(self):
        try:
            async for text in self.ws:
                msg = json.loads(text)
                fut = self.pending.get(msg.get("transaction"))
                if fut and not fut.done() and msg.get("janus") != "ack":
                    fut.set_result(msg)
        except websockets.exceptions.ConnectionClosed:
            pass  # a request waiting for an answer reports it

    async def request(self, msg, timeout=20):
        self.tx += 1
        t = f"t{self.tx}"
        fut = asyncio.get_running_loop().create_future()
        self.pending[t] = fut
        await self.ws.send(json.dumps(dict(msg, transaction=t)))
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise SystemExit(f"janus-forward: no answer from Janus to {msg.get('janus')} "
                             f"{json.dumps(msg.get('body', {}))[:120]} within {timeout} s")
        finally:
            self.pending.pop(t, None)


def plugin_data(reply):
    data = reply.get("plugindata", {}).get("data", {})
    if reply.get("janus") == "error" or "error" in data:
        raise SystemExit(f"janus-forward: Janus refused: {json.dumps(reply)[:300]}")
    return data


class Peer:
    """One PeerConnection and the audio frames it received."""

    def __init__(self):
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.frames = 0
        self.energy = 0.0  # sum of the frames' mean squares (full scale 1)
        self.tasks = []

        @self.pc.on("track")
        def on_track(track):
            self.tasks.append(asyncio.ensure_future(self.drain(track)))

    async def drain(self, track):
        try:
            while True:
                frame = await track.recv()
                a = frame.to_ndarray().astype(numpy.float32) / 32768
                self.energy += float(numpy.dot(a.ravel(), a.ravel())) / a.size
                self.frames += 1
        except MediaStreamError:
            pass

    async def close(self):
        for task in self.tasks:
            task.cancel()
        await self.pc.close()


async def message(janus, session, handle, body, jsep=None):
    msg = {"janus": "message", "session_id": session, "handle_id": handle, "body": body}
    if jsep:
        msg["jsep"] = jsep
    reply = await janus.request(msg)
    return plugin_data(reply), reply.get("jsep")


async def offer_from(peer):
    await peer.pc.setLocalDescription(await peer.pc.createOffer())
    return {"type": "offer", "sdp": peer.pc.localDescription.sdp}


async def answer_to(peer, jsep):
    await peer.pc.setRemoteDescription(RTCSessionDescription(jsep["sdp"], jsep["type"]))
    await peer.pc.setLocalDescription(await peer.pc.createAnswer())
    return {"type": "answer", "sdp": peer.pc.localDescription.sdp}


async def connected(peers, timeout=20):
    end = time.monotonic() + timeout
    while any(p.pc.connectionState != "connected" for p in peers):
        if time.monotonic() > end:
            states = [p.pc.connectionState for p in peers]
            raise SystemExit(f"janus-forward: PeerConnections not connected within {timeout} s: {states}")
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)  # Janus's side: DTLS done a moment after ours


async def videoroom_room(janus, session, attach, rid, per_room, streamers, pcm):
    """Publishers first (their feeds must exist to be subscribed to), then the subscriptions."""
    peers, publishers = [], []
    for p in range(streamers):
        peer, handle = Peer(), await attach()
        peer.pc.addTransceiver(SpeechTrack(pcm, random.randrange(1 << 16)), direction="sendonly")
        data, _ = await message(janus, session, handle, {"request": "join", "ptype": "publisher", "room": rid,
                                                         "display": f"load-{rid}-{p}"})
        feed = data["id"]
        _, jsep = await message(janus, session, handle, {"request": "publish", "audiocodec": "opus"}, await offer_from(peer))
        await peer.pc.setRemoteDescription(RTCSessionDescription(jsep["sdp"], jsep["type"]))
        peers.append(peer)
        publishers.append(feed)
    # Janus offers a feed to subscribers once its media is up (before: "No such feed").
    await connected(peers)
    for p in range(per_room):
        feeds = [f for i, f in enumerate(publishers) if i != p]
        if not feeds:
            continue
        peer, handle = Peer(), await attach()
        _, jsep = await message(janus, session, handle, {"request": "join", "ptype": "subscriber", "room": rid,
                                                         "streams": [{"feed": f} for f in feeds]})
        await message(janus, session, handle, {"request": "start"}, await answer_to(peer, jsep))
        peer.expected = len(feeds)
        peers.append(peer)
    return peers


async def audiobridge_room(janus, session, attach, rid, per_room, streamers, pcm):
    peers = []
    for p in range(per_room):
        peer, handle = Peer(), await attach()
        talking = p < streamers
        if talking:
            peer.pc.addTransceiver(SpeechTrack(pcm, random.randrange(1 << 16)), direction="sendrecv")
        else:
            peer.pc.addTransceiver("audio", direction="recvonly")
        _, jsep = await message(janus, session, handle, {"request": "join", "room": rid, "display": f"load-{rid}-{p}",
                                                         "muted": not talking}, await offer_from(peer))
        await peer.pc.setRemoteDescription(RTCSessionDescription(jsep["sdp"], jsep["type"]))
        peer.expected = 1
        peers.append(peer)
    return peers


async def run(args):
    backend = args["--backend"]
    rooms, per_room = int(args["--rooms"]), int(args["--participants"])
    streamers = int(args.get("--streamers", per_room))
    warmup, duration = float(args.get("--warmup", 5)), float(args.get("--duration", 20))
    jpid, base = int(args["--janus-pid"]), int(args.get("--room-base", 20000))
    pcm = speech_pcm(args["--speech"])
    async with websockets.connect(f"ws://127.0.0.1:{args['--ws']}/", subprotocols=["janus-protocol"],
                                  max_size=None, ping_interval=None) as ws:
        janus = Janus(ws)
        session = (await janus.request({"janus": "create"}))["data"]["id"]

        async def attach():
            r = await janus.request({"janus": "attach", "session_id": session, "plugin": PLUGIN[backend]})
            return r["data"]["id"]

        async def keepalive():
            while True:
                await asyncio.sleep(15)
                await janus.request({"janus": "keepalive", "session_id": session})

        pinger = asyncio.ensure_future(keepalive())
        control = await attach()
        rss_before = rss_mb(jpid)
        room_ids = [base + r for r in range(rooms)]
        for rid in room_ids:
            body = ({"request": "create", "room": rid, "publishers": per_room, "audiocodec": "opus",
                     "permanent": False} if backend == "videoroom" else
                    {"request": "create", "room": rid, "sampling_rate": 48000, "permanent": False})
            await message(janus, session, control, body)
        build = videoroom_room if backend == "videoroom" else audiobridge_room
        building = time.monotonic()
        peers = []
        for rid in room_ids:
            peers += await build(janus, session, attach, rid, per_room, streamers, pcm)
        set_up = time.monotonic()
        await asyncio.sleep(warmup)
        t0, j0, s0, f0 = time.monotonic(), cpu_seconds(jpid), cpu_seconds("self"), sum(p.frames for p in peers)
        e0 = sum(p.energy for p in peers)
        await asyncio.sleep(duration)
        t1, j1, s1, f1 = time.monotonic(), cpu_seconds(jpid), cpu_seconds("self"), sum(p.frames for p in peers)
        e1 = sum(p.energy for p in peers)
        window = t1 - t0
        streams = sum(p.expected for p in peers if hasattr(p, "expected"))
        point = {"backend": backend, "rooms": rooms, "participants": rooms * per_room, "per_room": per_room,
                 "streamers_per_room": streamers, "window_s": round(window, 1), "streams_received": streams,
                 "connected": sum(p.pc.connectionState == "connected" for p in peers), "peer_connections": len(peers),
                 "set_up_s": round(set_up - building, 1)}
        emit("janus_forward.cpu_pct", 100 * (j1 - j0) / window, "% of one core", **point)
        emit("janus_forward.rss_mb", rss_mb(jpid), "MB", **point, before=round(rss_before, 2))
        emit("janus_forward.generator_cpu_pct", 100 * (s1 - s0) / window, "% of one core", **point)
        # What the peers received: 50 frames a second per stream when Janus keeps up (and the
        # generator too: its own CPU is beside it).
        emit("janus_forward.frames_per_stream_s", (f1 - f0) / window / max(streams, 1), "frames/s", **point)
        emit("janus_forward.forwarded_s", (f1 - f0) / window, "packets/s", **point)
        # The level of what they heard (speech looped with a second of silence: around -30 dBFS;
        # -90 would be Janus forwarding or mixing silence).
        emit("janus_forward.received_dbfs", 10 * math.log10(max((e1 - e0) / max(f1 - f0, 1), 1e-9)), "dBFS", **point)
        pinger.cancel()
        for peer in peers:
            await peer.close()
        for rid in room_ids:
            await message(janus, session, control, {"request": "destroy", "room": rid})
        await janus.request({"janus": "destroy", "session_id": session})
        janus.reader.cancel()


def compare(path):
    """Per point, the two backends side by side: their ratio, VideoRoom's cost per forwarded
    packet a second and AudioBridge's per participant; then each one's least-squares line over
    the points where the peers got every frame (a point the generator could not keep up with
    measures less than its load)."""
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    cpu = {(r["backend"], r["rooms"], r["per_room"], r["streamers_per_room"]): r for r in rows
           if r["metric"] == "janus_forward.cpu_pct"}
    full = {(r["backend"], r["rooms"], r["per_room"], r["streamers_per_room"]) for r in rows
            if r["metric"] == "janus_forward.frames_per_stream_s" and r["value"] >= 49}
    fits = {"videoroom": [], "audiobridge": []}
    for (backend, rooms, per_room, streamers), row in sorted(cpu.items()):
        point = {"rooms": rooms, "per_room": per_room, "streamers_per_room": streamers,
                 "participants": rooms * per_room, "kept_up": (backend, rooms, per_room, streamers) in full}
        if backend == "videoroom":
            streams = row["streams_received"]
            emit("janus_forward.videoroom_pct_per_1000_pps", 1000 * row["value"] / (50 * streams), "% of one core", **point)
            if point["kept_up"]:
                fits["videoroom"].append((50 * streams / 1000, row["value"]))
            other = cpu.get(("audiobridge", rooms, per_room, streamers))
            if other:
                emit("janus_forward.audiobridge_over_videoroom", other["value"] / max(row["value"], 1e-6), "ratio", **point,
                     videoroom_cpu_pct=row["value"], audiobridge_cpu_pct=other["value"])
        else:
            emit("janus_forward.audiobridge_pct_per_participant", row["value"] / (rooms * per_room), "% of one core", **point)
            if point["kept_up"]:
                fits["audiobridge"].append((rooms * per_room, row["value"]))
    for backend, unit_name in (("videoroom", "per_1000_pps"), ("audiobridge", "per_participant")):
        pts = fits[backend]
        if len(pts) < 2 or len({x for x, _ in pts}) < 2:
            continue
        n = len(pts)
        mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
        slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
        emit(f"janus_forward.{backend}_fit_pct_{unit_name}", slope, "% of one core", points=n,
             intercept=round(my - slope * mx, 3))


def main():
    argv = sys.argv[1:]
    if len(argv) == 2 and argv[0] == "compare":
        return compare(argv[1])
    if not argv or argv[0] != "run":
        raise SystemExit(__doc__)
    args = dict(zip(argv[1::2], argv[2::2]))
    asyncio.run(run(args))


if __name__ == "__main__":
    main()

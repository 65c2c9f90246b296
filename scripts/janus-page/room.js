// A browser participant in a Janus AudioBridge room, for roomd's end-to-end tests: the browser
// users an appliance shares a room with (issue 12). Janus's WebSocket API by hand (a few dozen
// lines instead of janus.js and its dependencies): create -> attach janus.plugin.audiobridge ->
// join with an SDP offer -> the answer; trickle; a keepalive every 25 s (Janus's
// session_timeout is 60 s). Everything it sees is reported to the test's HTTP server (the
// page's own origin unless `report` says otherwise):
//   POST /events?peer=P   JSON lines: {peer, type, t (ms since load), wall (ms epoch), ...}
//   POST /upload?peer=P   what it heard (Janus's mix for this participant), 48 kHz 16-bit WAV
//   GET  /command?peer=P  polled every 200 ms: lines of mute | unmute | leave | join | upload
//
// Query string:
//   janus=ws://127.0.0.1:8188  Janus's WebSocket URL (required)
//   room=1234                  AudioBridge room
//   display=NAME               the participant's display name; peer=NAME names it to the test
//   send=1                     send the microphone (0: receive only)
//   muted=0                    join muted
//   record=SECONDS             record that long from page load, then upload (0: no recording)
//   rejoin=1                   when Janus's WebSocket closes (a restart), join again every 1 s
//   echo=1                     send back what it hears (Janus's mix) instead of a microphone:
//                              an appliance alone with it hears itself after appliance -> Janus
//                              -> browser -> Janus -> appliance (scripts/bench janus)
//   report=URL                 the test server's origin (default: this page's)
"use strict";

const q = new URLSearchParams(location.search);
const P = {
  janus: q.get("janus"),
  room: Number(q.get("room") || 1234),
  display: q.get("display") || "browser",
  send: q.get("send") !== "0",
  muted: q.get("muted") === "1",
  record: Number(q.get("record") || 0),
  rejoin: q.get("rejoin") !== "0",
  echo: q.get("echo") === "1",
  report: q.get("report") || location.origin,
};
P.peer = q.get("peer") || P.display;
const t0 = performance.now();

// --- reports, in order, one request in flight -------------------------------------------
const outbox = [];
let posting = false;
function report(type, fields = {}) {
  const line = { peer: P.peer, type, t: Math.round(performance.now() - t0), wall: Date.now(), ...fields };
  outbox.push(JSON.stringify(line));
  document.getElementById("status").textContent = type + " " + JSON.stringify(fields);
  flush();
}
async function flush() {
  if (posting || outbox.length === 0) return;
  posting = true;
  const body = outbox.splice(0).join("\n") + "\n";
  try { await fetch(`${P.report}/events?peer=${encodeURIComponent(P.peer)}`, { method: "POST", body }); }
  catch (e) { console.log("report failed: " + e); }
  posting = false;
  flush();
}
window.onerror = (message) => report("error", { error: String(message) });

// --- Janus over one WebSocket ------------------------------------------------------------
let ws = null, sessionId = 0, handleId = 0, pc = null, sender = null, keepalive = 0, mic = null;
let left = false, transaction = 0, remoteSource = null;
const pending = new Map();
const names = new Map(); // participant id -> display, to name `leaving` and `talking`

function request(message) {
  const id = "t" + (++transaction);
  message.transaction = id;
  if (sessionId) message.session_id = sessionId;
  if (handleId && message.janus !== "create" && message.janus !== "attach" && message.janus !== "keepalive" &&
      message.janus !== "destroy") message.handle_id = handleId;
  return new Promise((resolve) => {
    pending.set(id, resolve);
    ws.send(JSON.stringify(message));
  });
}
function must(reply, what) {
  if (reply.janus === "error") throw new Error(`${what}: ${reply.error ? reply.error.reason : "error"}`);
  return reply;
}

function onMessage(m) {
  // Replies (success, error, ack) settle their request; events come through below, the
  // asynchronous plugin events with the transaction of the request they answer.
  if (m.transaction && pending.has(m.transaction) && m.janus !== "event") {
    pending.get(m.transaction)(m);
    pending.delete(m.transaction);
    return;
  }
  if (m.janus === "event") {
    const data = m.plugindata && m.plugindata.data;
    if (data) onAudioBridge(data);
    if (m.jsep && pc) pc.setRemoteDescription(m.jsep).catch((e) => report("error", { error: "answer: " + e }));
    return;
  }
  if (m.janus !== "ack") {
    // webrtcup, media {type, receiving}, slowlink, hangup {reason}, detached, timeout
    report("janus", { janus: m.janus, media: m.type, receiving: m.receiving, reason: m.reason, uplink: m.uplink, lost: m.lost });
  }
}

function onAudioBridge(d) {
  report("audiobridge", { data: d });
  const participants = d.participants || [];
  if (d.audiobridge === "joined" && d.id !== undefined) report("joined", { id: d.id, room: d.room });
  for (const p of participants) {
    names.set(p.id, p.display);
    report("participant", { id: p.id, display: p.display, muted: p.muted, setup: p.setup, talking: p.talking });
  }
  if (d.leaving !== undefined) report("leaving", { id: d.leaving, display: names.get(d.leaving) });
  if (d.audiobridge === "talking" || d.audiobridge === "stopped-talking") {
    report("talking", { id: d.id, display: names.get(d.id), talking: d.audiobridge === "talking" });
  }
  if (d.error) report("error", { error: d.error, code: d.error_code });
}

function openSocket() {
  return new Promise((resolve, reject) => {
    const s = new WebSocket(P.janus, "janus-protocol");
    const closed = new Promise((done) => { s.onclose = done; });
    s.onopen = () => resolve({ s, closed });
    closed.then(() => reject(new Error("Janus's WebSocket closed before it opened")));
  });
}

// One connection's life: create, attach, join; resolves when the WebSocket closes.
async function connectAndJoin() {
  const { s, closed } = await openSocket();
  ws = s;
  ws.onmessage = (e) => onMessage(JSON.parse(e.data));
  closed.then(() => { for (const settle of pending.values()) settle({ janus: "error", error: { reason: "closed" } }); pending.clear(); });
  report("status", { status: "ws-open" });
  sessionId = must(await request({ janus: "create" }), "create").data.id;
  keepalive = setInterval(() => request({ janus: "keepalive" }), 25000);
  handleId = must(await request({ janus: "attach", plugin: "janus.plugin.audiobridge" }), "attach").data.id;
  await join();
  await closed;
}

async function join() {
  // Host candidates only (no STUN server): Janus and the browsers share a network.
  pc = new RTCPeerConnection({ iceServers: [] });
  const transceiver = pc.addTransceiver("audio", { direction: P.send ? "sendrecv" : "recvonly" });
  sender = transceiver.sender;
  if (mic) await sender.replaceTrack(mic);
  pc.ontrack = (e) => listen(e.streams[0] || new MediaStream([e.track]));
  // Candidates found before the join is on its way wait for it (Janus would queue them too).
  let joinSent = false;
  const early = [];
  const trickle = (candidate) => request({ janus: "trickle", candidate });
  pc.onicecandidate = (e) => {
    const c = e.candidate
      ? { candidate: e.candidate.candidate, sdpMid: e.candidate.sdpMid, sdpMLineIndex: e.candidate.sdpMLineIndex }
      : { completed: true };
    if (e.candidate) report("candidate", { candidate: e.candidate.candidate });
    if (joinSent) trickle(c); else early.push(c);
  };
  pc.onconnectionstatechange = () => {
    report("status", { status: "pc-" + pc.connectionState });
    if (pc.connectionState === "connected") startMicrophone();
  };
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);
  const joined = request({ janus: "message", body: { request: "join", room: P.room, display: P.display, muted: P.muted },
                           jsep: { type: "offer", sdp: offer.sdp } });
  joinSent = true;
  for (const c of early.splice(0)) trickle(c);
  must(await joined, "join");
}

// The microphone is taken once the PeerConnection is up, so Chromium's fake device starts
// playing its file when the audio can flow (the file plays from its start when the track is
// opened), and the same track is reused when a restarted Janus is joined again.
async function startMicrophone() {
  if (!P.send || P.echo) return;
  try {
    if (!mic) {
      // No echo cancellation, noise suppression or gain control: the test compares what
      // arrives with the file.
      const stream = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false },
      });
      mic = stream.getAudioTracks()[0];
      report("status", { status: "microphone", label: mic.label });
    }
    await sender.replaceTrack(mic);
  } catch (e) {
    report("error", { error: "microphone: " + e });
  }
}

function teardown() {
  clearInterval(keepalive);
  if (pc) pc.close();
  pc = null; sender = null; sessionId = 0; handleId = 0;
}

async function run() {
  while (!left) {
    try {
      await connectAndJoin();
    } catch (e) {
      // No Janus to talk to (yet) is part of a restart; a refusal by a Janus that answered is an error.
      if (ws) report("error", { error: String(e.message || e) });
      else report("status", { status: "connect-failed", error: String(e.message || e) });
    }
    const wasOpen = ws && sessionId;
    teardown();
    if (ws) { try { ws.close(); } catch (e) {} ws = null; }
    if (left) break;
    if (wasOpen) report("status", { status: "ws-closed" });
    if (!P.rejoin) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
}

async function leave() {
  left = true;
  if (!ws) return;
  await request({ janus: "message", body: { request: "leave" } });
  await request({ janus: "detach" });
  await request({ janus: "destroy" });
  report("status", { status: "left" });
  ws.close();
}

async function setMuted(muted) {
  if (!ws || !handleId) return report("error", { error: "not joined" });
  must(await request({ janus: "message", body: { request: "configure", muted } }), "configure");
  report("status", { status: muted ? "muted" : "unmuted" });
}

// --- recording what Janus sends: WebAudio, 48 kHz -----------------------------------------
let audio = null, bus = null, chunks = [], recorded = 0, uploaded = false;
const recordFrames = Math.round(P.record * 48000);

async function startRecorder() {
  audio = new AudioContext({ sampleRate: 48000 });
  await audio.audioWorklet.addModule("recorder-worklet.js");
  const node = new AudioWorkletNode(audio, "recorder", {
    numberOfInputs: 1, numberOfOutputs: 1, channelCount: 1, channelCountMode: "explicit", channelInterpretation: "speakers",
  });
  bus = audio.createGain();
  bus.connect(node);
  // The graph is rendered only when it reaches the destination; silently.
  const sink = audio.createGain();
  sink.gain.value = 0;
  node.connect(sink).connect(audio.destination);
  node.port.onmessage = (e) => {
    if (uploaded || recorded >= recordFrames) return;
    chunks.push(e.data);
    recorded += e.data.length;
    if (recorded >= recordFrames) upload();
  };
  await audio.resume();
  report("status", { status: "recording", sampleRate: audio.sampleRate, state: audio.state });
}

function listen(stream) {
  const element = document.getElementById("remote");
  element.srcObject = stream;
  element.play().catch((e) => report("error", { error: "play: " + e }));
  if (P.echo) startEcho(stream);
  if (!audio) return;
  if (remoteSource) remoteSource.disconnect();
  remoteSource = audio.createMediaStreamSource(stream);
  remoteSource.connect(bus);
  report("status", { status: "remote-track" });
}

// echo=1: what Janus sends goes straight back out (WebAudio, no processing), the way a
// browser user's speaker-to-microphone path would, minus the room.
let echoContext = null;
async function startEcho(stream) {
  try {
    if (!echoContext) echoContext = new AudioContext({ sampleRate: 48000, latencyHint: "interactive" });
    const out = echoContext.createMediaStreamDestination();
    echoContext.createMediaStreamSource(stream).connect(out);
    await echoContext.resume();
    if (sender) await sender.replaceTrack(out.stream.getAudioTracks()[0]);
    report("status", { status: "echo", baseLatency: echoContext.baseLatency });
  } catch (e) {
    report("error", { error: "echo: " + e });
  }
}

function wav(samples, rate) {
  const bytes = new DataView(new ArrayBuffer(44 + samples.length * 2));
  const text = (at, s) => { for (let i = 0; i < s.length; i++) bytes.setUint8(at + i, s.charCodeAt(i)); };
  text(0, "RIFF"); bytes.setUint32(4, 36 + samples.length * 2, true); text(8, "WAVE");
  text(12, "fmt "); bytes.setUint32(16, 16, true); bytes.setUint16(20, 1, true); bytes.setUint16(22, 1, true);
  bytes.setUint32(24, rate, true); bytes.setUint32(28, rate * 2, true); bytes.setUint16(32, 2, true); bytes.setUint16(34, 16, true);
  text(36, "data"); bytes.setUint32(40, samples.length * 2, true);
  for (let i = 0; i < samples.length; i++) {
    bytes.setInt16(44 + i * 2, Math.round(Math.max(-1, Math.min(1, samples[i])) * 32767), true);
  }
  return new Blob([bytes.buffer], { type: "audio/wav" });
}

async function upload() {
  if (uploaded || !audio) return;
  uploaded = true;
  const samples = new Float32Array(recorded);
  let at = 0;
  for (const c of chunks) { samples.set(c.subarray(0, Math.min(c.length, recorded - at)), at); at += c.length; }
  chunks = [];
  try {
    await fetch(`${P.report}/upload?peer=${encodeURIComponent(P.peer)}`, { method: "POST", body: wav(samples, audio.sampleRate) });
    report("status", { status: "uploaded", frames: samples.length, sampleRate: audio.sampleRate });
  } catch (e) {
    report("error", { error: "upload: " + e });
  }
}

// --- commands from the test ------------------------------------------------------------
async function command(c) {
  report("command", { command: c });
  if (c === "mute") await setMuted(true);
  else if (c === "unmute") await setMuted(false);
  else if (c === "leave") await leave();
  else if (c === "join") { if (left) { left = false; run(); } }
  else if (c === "upload") await upload();
  else report("error", { error: "unknown command " + c });
}
async function poll() {
  try {
    const reply = await fetch(`${P.report}/command?peer=${encodeURIComponent(P.peer)}`);
    for (const c of (await reply.text()).split("\n").filter(Boolean)) await command(c.trim());
  } catch (e) { console.log("poll: " + e); }
  setTimeout(poll, 200);
}

(async () => {
  report("status", { status: "loaded", params: P, userAgent: navigator.userAgent });
  if (!P.janus) return report("error", { error: "no janus= in the query string" });
  if (recordFrames > 0) {
    try { await startRecorder(); } catch (e) { report("error", { error: "recorder: " + e }); }
  }
  poll();
  run();
})();

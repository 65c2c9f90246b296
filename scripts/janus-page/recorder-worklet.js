// Runs on the audio rendering thread: hands every 128-frame block of its (mono) input to the
// page, which keeps the recording. An absent input (nobody connected yet, a rejoin under way)
// is recorded as silence, so the recording stays one continuous timeline from its start.
class Recorder extends AudioWorkletProcessor {
  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    this.port.postMessage(channel ? channel.slice() : new Float32Array(128));
    return true;
  }
}
registerProcessor("recorder", Recorder);

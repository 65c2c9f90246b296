// Counts heap allocations per thread. Built as libroomallocprobe.so and LD_PRELOADed by
// scripts/bench; the engine finds roomallocprobe_thread_count with dlsym and, when present,
// samples it on the audio thread around each steady-state period. Never linked into roomd.
#ifndef ROOMALLOCPROBE_H
#define ROOMALLOCPROBE_H
unsigned long roomallocprobe_thread_count(void);
/// Swift retains (swift_retain, swift_retain_n) made so far by the calling thread.
unsigned long roomallocprobe_thread_retains(void);
#endif

// RoomAllocProbe on aarch64 (scripts/cross-arm64): run with libroomallocprobe.so LD_PRELOADed
// and the probe's per-thread counter must see each malloc/calloc/realloc/posix_memalign, and
// nothing where nothing allocates. Run without the preload it reports the probe absent
// (exit 3), which shows the counting comes from the preload.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long (*count_fn)(void);

int main(int argc, char **argv) {
    (void)argv;
    count_fn count = (count_fn)dlsym(RTLD_DEFAULT, "roomallocprobe_thread_count");
    if (!count) {
        printf("alloc_check: roomallocprobe_thread_count not found (probe not preloaded)\n");
        return 3;
    }
    // Sizes depend on argc so the compiler cannot fold the calls away.
    size_t n = 100 + (size_t)argc;
    int failures = 0;

    unsigned long c0 = count();
    unsigned long c1 = count();
    volatile unsigned long sink = 0;
    for (size_t i = 0; i < n; i++) sink += i;
    unsigned long c2 = count();
    printf("%s alloc-none: %lu allocations counted around a loop that allocates nothing (expected 0)\n",
           c2 - c1 == 0 ? "PASS" : "FAIL", c2 - c1);
    failures += c2 - c1 != 0;

    struct { const char *what; unsigned long before, after; } steps[4];
    char *volatile p;
    steps[0].what = "malloc";
    steps[0].before = count(); p = malloc(n); steps[0].after = count();
    memset(p, 1, n);
    steps[1].what = "realloc";
    steps[1].before = count(); p = realloc(p, n * 4); steps[1].after = count();
    free(p);
    steps[2].what = "calloc";
    steps[2].before = count(); p = calloc(n, 2); steps[2].after = count();
    free(p);
    void *q = NULL;
    steps[3].what = "posix_memalign";
    steps[3].before = count(); int rc = posix_memalign(&q, 64, n); steps[3].after = count();
    free(q);
    for (int i = 0; i < 4; i++) {
        unsigned long d = steps[i].after - steps[i].before;
        int ok = d == 1 && (i != 3 || rc == 0);
        printf("%s alloc-%s: one %s(%zu) counted as %lu allocation(s) (expected 1)\n", ok ? "PASS" : "FAIL",
               steps[i].what, steps[i].what, n, d);
        failures += !ok;
    }
    // free is not an allocation
    unsigned long f0 = count();
    p = malloc(n);  // through the volatile pointer: a plain free(malloc(n)) is folded away
    free(p);
    unsigned long f1 = count();
    printf("%s alloc-free: malloc + free counted as %lu (expected 1: free does not count)\n", f1 - f0 == 1 ? "PASS" : "FAIL", f1 - f0);
    failures += f1 - f0 != 1;
    printf("alloc_check: %s (%d failed; %lu allocations on this thread since start-up, %lu before main's first count)\n",
           failures ? "FAIL" : "PASS", failures, count(), c0);
    return failures ? 1 : 0;
}

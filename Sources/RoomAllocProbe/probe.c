// Interposes malloc and friends, forwarding to glibc's __libc_* entry points (no dlsym, so no
// recursion at start-up), and counts every allocating call in a thread-local counter. The
// counter is initial-exec TLS: reading it allocates nothing.
#include <stddef.h>
#include <errno.h>
#include "roomallocprobe.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static __thread unsigned long allocations __attribute__((tls_model("initial-exec")));

unsigned long roomallocprobe_thread_count(void) { return allocations; }

void *malloc(size_t n) { allocations++; return __libc_malloc(n); }
void *calloc(size_t n, size_t m) { allocations++; return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { allocations++; return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t a, size_t n) { allocations++; return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { allocations++; return __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    allocations++;
    if (a < sizeof(void *) || (a & (a - 1)) != 0) return EINVAL;
    void *p = __libc_memalign(a, n);
    if (!p && n) return ENOMEM;
    *out = p;
    return 0;
}

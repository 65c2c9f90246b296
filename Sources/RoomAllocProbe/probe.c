// Interposes malloc and friends, forwarding to glibc's __libc_* entry points (no dlsym, so no
// recursion at start-up), and counts every allocating call in a thread-local counter. The
// counter is initial-exec TLS: reading it allocates nothing.
#define _GNU_SOURCE
#include <stddef.h>
#include <errno.h>
#include <dlfcn.h>
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

// Reference counting: swift_retain and swift_retain_n are interposed the same way (compiled
// Swift calls them through the PLT, so the preload wins) and forwarded to libswiftCore's with
// RTLD_NEXT, resolved once. Only retains are counted: every release pairs with one, and a
// retain is what touches a shared object's count from the audio thread.
typedef void *(*retain_fn)(void *);
typedef void *(*retain_n_fn)(void *, unsigned int);
static retain_fn next_retain;
static retain_n_fn next_retain_n;
static __thread unsigned long retains __attribute__((tls_model("initial-exec")));

unsigned long roomallocprobe_thread_retains(void) { return retains; }

void *swift_retain(void *object) {
    retain_fn next = __atomic_load_n(&next_retain, __ATOMIC_ACQUIRE);
    if (!next) {
        next = (retain_fn)dlsym(RTLD_NEXT, "swift_retain");
        __atomic_store_n(&next_retain, next, __ATOMIC_RELEASE);
    }
    if (object) retains++;
    return next(object);
}

void *swift_retain_n(void *object, unsigned int n) {
    retain_n_fn next = __atomic_load_n(&next_retain_n, __ATOMIC_ACQUIRE);
    if (!next) {
        next = (retain_n_fn)dlsym(RTLD_NEXT, "swift_retain_n");
        __atomic_store_n(&next_retain_n, next, __ATOMIC_RELEASE);
    }
    if (object) retains += n;
    return next(object, n);
}

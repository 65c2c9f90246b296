// The PASS/FAIL line every check program prints, and the count of failures it exits with.
#ifndef CROSS_CHECK_H
#define CROSS_CHECK_H
#include <stdarg.h>
#include <stdio.h>

static int failures;

static void result(int ok, const char *name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s %s: ", ok ? "PASS" : "FAIL", name);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    if (!ok) failures++;
}
#endif

/* Shared by the SIP prototypes (issue 29): what each prints so the numbers compare. */
#ifndef PROTO_MEASURE_H
#define PROTO_MEASURE_H
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

/* Resident set size now, in KiB, from /proc/self/status (VmRSS). */
static inline long proto_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* User + system CPU time of this process so far, in milliseconds. */
static inline double proto_cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}
#endif

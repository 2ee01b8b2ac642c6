/* bench_clock.h -- the monotonic clock the C benchmarks time with. */
/* See LICENSE */
#ifndef DLUA_BENCH_CLOCK_H
#define DLUA_BENCH_CLOCK_H
#include <time.h>

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif

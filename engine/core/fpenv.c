/* fpenv.c -- the floating-point mode of the threads that run the engine.
 *
 * Subnormal floats (below 1.2e-38) cost x86 cores a microcode assist per
 * operation, up to a hundred times a normal one. They show up in real training:
 * Adam's second moment of a weight whose gradient has died, activations of
 * an unnormalised net late in a run, and a run that meets them slows down step
 * after step (docs/benchmarks.md: 22.0 -> 26.2 s per epoch). So the engine's
 * threads flush subnormal results to zero (FTZ) and read subnormal inputs as
 * zero (DAZ), as TensorFlow's do. The mode is the same in every thread that
 * computes (the Lua thread that creates the context, the pool's workers, the
 * pipeline's workers), so results stay the same at any thread count; it only
 * changes results in which a subnormal appears. In the Lua thread it applies
 * to Lua's own numbers too (1e-310 * 1 is 0).
 *
 * DLUA_FLUSH_SUBNORMALS=0 keeps IEEE gradual underflow (documented in dlua(1)).
 */
/* See LICENSE */
#include "core/dl.h"
#include "core/env.h"

#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define MXCSR_FTZ 0x8000u
#define MXCSR_DAZ 0x0040u
#endif

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int flush = 1;

static void probe(void) {
  flush = dl_env_flag("DLUA_FLUSH_SUBNORMALS", 1) != 0;     /* malformed: refused at load */
}

int dl_fp_env_error(char *msg, size_t cap) { return dl_env_flag_error("DLUA_FLUSH_SUBNORMALS", msg, cap); }

int dl_fp_flush(void) {
  pthread_once(&probe_once, probe);
  return flush;
}

void dl_fp_enter(void) {
  pthread_once(&probe_once, probe);
#if defined(__x86_64__) || defined(__i386__)
  if (flush) _mm_setcsr(_mm_getcsr() | MXCSR_FTZ | MXCSR_DAZ);
#endif
}

/* rng.c -- Philox-4x32-10 counter-based random numbers (Salmon et al., SC'11).
 *
 * A stream is (key, counter): block `counter` of key `key` is four 32-bit
 * words, a pure function of both, so streams split without shared state and
 * the value at a position never depends on who asked first. Uniforms are in
 * [0, 1) with 24 random bits; normals use Box-Muller on pairs of uniforms.
 */
/* See LICENSE */
#include "core/dl.h"

#include <math.h>

void dl_philox(uint64_t key, uint64_t counter, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0;
    uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

static float u01(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

uint64_t dl_rng_uniform(uint64_t key, uint64_t counter, float *out, size_t n) {
  uint32_t b[4];
  for (size_t i = 0; i < n; i += 4, counter++) {
    dl_philox(key, counter, b);
    for (size_t j = 0; j < 4 && i + j < n; j++) out[i + j] = u01(b[j]);
  }
  return counter;
}

uint64_t dl_rng_normal(uint64_t key, uint64_t counter, float *out, size_t n) {
  uint32_t b[4];
  for (size_t i = 0; i < n; i += 4, counter++) {
    dl_philox(key, counter, b);
    for (size_t j = 0; j < 4; j += 2) {
      double u1 = ((double)b[j] + 1.0) / 4294967297.0;   /* (0, 1] */
      double u2 = (double)b[j + 1] / 4294967296.0;
      double r = sqrt(-2.0 * log(u1));
      double th = 6.283185307179586 * u2;
      if (i + j < n) out[i + j] = (float)(r * cos(th));
      if (i + j + 1 < n) out[i + j + 1] = (float)(r * sin(th));
    }
  }
  return counter;
}

/* conv_simd.c -- which vector kernels conv.c and the Winograd kernels run, and the calls
 * into them.
 *
 * The kernels (conv_simd_kern.h, conv_winograd_kern.h) are written once on 16-lane vectors
 * and compiled for AVX-512 and for AVX2 with FMA; both give the same bits, so a run's results
 * do not depend on which of the two its CPU has. DLUA_CONV_SIMD chooses: "auto" (or unset)
 * the widest the CPU runs, "avx512", "avx2" or "portable" (conv.c's loops, im2col for every
 * layer and no Winograd: a reference that differs by rounding where the direct and Winograd
 * kernels would run). A value that names no path, or one the CPU lacks, stops the module
 * from loading (dl_conv_simd_env_error).
 */
/* See LICENSE */
#include "ops/conv_simd.h"

#include "core/env.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAMES[] = {"portable", "avx2", "avx512"};     /* by DL_CONV_... */

static int path;
static pthread_once_t path_once = PTHREAD_ONCE_INIT;

static int runnable(int p) {
#if DL_SIMD_BUILD
  __builtin_cpu_init();
  if (p == DL_CONV_AVX512) return __builtin_cpu_supports("avx512f");
  if (p == DL_CONV_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return p == DL_CONV_PORTABLE;
}

static int widest(void) {
  int p = DL_CONV_AVX512;
  while (p > DL_CONV_PORTABLE && !runnable(p)) p--;
  return p;
}

/* the path DLUA_CONV_SIMD names, -1 for auto (or unset), -2 for a name that is no path */
static int named(void) {
  const char *s = dl_env_get("DLUA_CONV_SIMD");
  if (!s || strcmp(s, "auto") == 0) return -1;
  for (int p = 0; p < 3; p++)
    if (strcmp(s, NAMES[p]) == 0) return p;
  return -2;
}

static void choose(void) {
  int p = named();
  path = p >= 0 && runnable(p) ? p : widest();
}

int dl_conv_simd(void) {
  pthread_once(&path_once, choose);
  return path;
}

const char *dl_conv_simd_name(void) { return NAMES[dl_conv_simd()]; }

int dl_conv_simd_forced(void) { return named() >= 0; }

int dl_conv_simd_runs(int p) { return p >= DL_CONV_PORTABLE && p <= DL_CONV_AVX512 && runnable(p); }

int dl_conv_simd_env_error(char *msg, size_t cap) {
  int p = named();
  if (p == -1 || (p >= 0 && runnable(p))) return 0;
  if (p >= 0)
    snprintf(msg, cap, "DLUA_CONV_SIMD=%s: this CPU cannot run that path (it has %s)", NAMES[p], NAMES[widest()]);
  else
    snprintf(msg, cap, "DLUA_CONV_SIMD=%.40s: no such convolution path (valid: auto, avx512, avx2, portable)",
             dl_env_get("DLUA_CONV_SIMD"));
  return 1;
}

int dl_conv_direct_fits(int64_t C, int64_t kh, int64_t kw, int64_t Wo) {
  return kw <= 7 && C * kh * kw <= 100 && Wo >= 12;
}

#if DL_SIMD_BUILD
static const dl_conv_kernels *kernels(void) {
  return dl_conv_simd() == DL_CONV_AVX512 ? &dl_conv_kernels_avx512 : &dl_conv_kernels_avx2;
}
#endif

void dl_conv_copy_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t len) {
#if DL_SIMD_BUILD
  if (dl_conv_simd() != DL_CONV_PORTABLE) {
    kernels()->copy_rows(dst, dld, src, sld, rows, len);
    return;
  }
#endif
  for (int64_t r = 0; r < rows; r++)
    for (int64_t q = 0; q < len; q++) dst[r * dld + q] = src[r * sld + q];
}

void dl_conv_add_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t len) {
#if DL_SIMD_BUILD
  if (dl_conv_simd() != DL_CONV_PORTABLE) {
    kernels()->add_rows(dst, dld, src, sld, rows, len);
    return;
  }
#endif
  for (int64_t r = 0; r < rows; r++)
    for (int64_t q = 0; q < len; q++) dst[r * dld + q] += src[r * sld + q];
}

/* conv.c calls the three below only on a vector path (dl_conv_simd() != DL_CONV_PORTABLE) */
void dl_conv_direct_forward(const dl_conv_direct_geom *g, const float *xp, const float *w, const float *bias,
                            float *out) {
#if DL_SIMD_BUILD
  if (dl_conv_simd() != DL_CONV_PORTABLE) kernels()->direct_forward(g, xp, w, bias, out);
#else
  (void)g; (void)xp; (void)w; (void)bias; (void)out;
#endif
}

void dl_conv_direct_wgrad(const dl_conv_direct_geom *g, const float *xp, const float *gy, float *gw, int accumulate) {
#if DL_SIMD_BUILD
  if (dl_conv_simd() != DL_CONV_PORTABLE) kernels()->direct_wgrad(g, xp, gy, gw, accumulate);
#else
  (void)g; (void)xp; (void)gy; (void)gw; (void)accumulate;
#endif
}

void dl_conv_maxpool2x2_row(const float *r0, int64_t W, int64_t i0, int64_t Wo, float *out, int64_t *arg) {
#if DL_SIMD_BUILD
  if (dl_conv_simd() != DL_CONV_PORTABLE) kernels()->maxpool2x2_row(r0, W, i0, Wo, out, arg);
#else
  (void)r0; (void)W; (void)i0; (void)Wo; (void)out; (void)arg;
#endif
}

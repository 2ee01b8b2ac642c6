/* sgemm_direct.c -- the same products as matmul.lua, timed by calling cblas_sgemm directly.
 * Build: gcc -O2 -o sgemm_direct sgemm_direct.c -lopenblas
 * Run:   ./sgemm_direct [threads=1] [window_seconds=1] [windows=5]  (one JSON line per shape) */
/* See LICENSE */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_clock.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  double win = argc > 2 ? atof(argv[2]) : 1.0;
  int nwin = argc > 3 ? atoi(argv[3]) : 5;
  openblas_set_num_threads(threads);
  struct { const char *name; int M, N, K; } shapes[] = {{"sq1024", 1024, 1024, 1024}, {"b256_784x1024", 256, 1024, 784}};
  for (int s = 0; s < 2; s++) {
    int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
    float *a = aligned_alloc(64, sizeof(float) * (size_t)M * (size_t)K + 64);
    float *b = aligned_alloc(64, sizeof(float) * (size_t)K * (size_t)N + 64);
    float *c = aligned_alloc(64, sizeof(float) * (size_t)M * (size_t)N + 64);
    for (long i = 0; i < (long)M * K; i++) a[i] = (float)(i % 17) * 0.1f - 0.8f;
    for (long i = 0; i < (long)K * N; i++) b[i] = (float)(i % 13) * 0.1f - 0.6f;
    double flops = 2.0 * M * N * K, r[64];
    for (int w = -1; w < nwin && w < 64; w++) {
      int n = 0;
      double t0 = bench_now();
      do {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
        n++;
      } while (bench_now() - t0 < win);
      if (w >= 0) r[w] = n * flops / (bench_now() - t0) / 1e9;
    }
    qsort(r, (size_t)nwin, sizeof r[0], cmp);
    printf("{\"bench\":\"matmul\",\"impl\":\"cblas_sgemm\",\"shape\":\"%s\",\"threads\":%d,\"gflops_median\":%.1f,"
           "\"min\":%.1f,\"max\":%.1f}\n", shapes[s].name, threads, r[(nwin - 1) / 2], r[0], r[nwin - 1]);
    free(a); free(b); free(c);
  }
  return 0;
}

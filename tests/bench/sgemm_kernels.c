/* sgemm_kernels.c -- the rate of each float32 matrix-product path of engine/ops/sgemm.c
 * (avx512, avx2: dlua's own kernels, DLUA_GEMM) against OpenBLAS's cblas_sgemm, one thread,
 * on the products dlua's workloads run: the MLP's layers forward and backward (batch 256),
 * ResNet-18's im2col products, Winograd's tile products. CPU time of the calling thread (so a
 * busy machine slows the clock less than wall time would), best of `reps` runs per shape.
 * Prints one JSON line per shape and path, with the largest difference to OpenBLAS's result.
 * Build and run: tests/bench/run_matmul.sh (OPENBLAS_CORETYPE as the environment sets it). */
/* See LICENSE */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ops/sgemm.h"

char *openblas_get_corename(void);

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 7;
  openblas_set_num_threads(1);
  static const struct { const char *what; int ta, tb; long M, N, K; } S[] = {
    {"mlp fc1 forward (x w^T)", 0, 1, 256, 1024, 784},  {"mlp fc2 forward", 0, 1, 256, 1024, 1024},
    {"mlp fc2 input grad (g w)", 0, 0, 256, 1024, 1024}, {"mlp fc2 weight grad (g^T x)", 1, 0, 1024, 1024, 256},
    {"resnet conv 64ch im2col", 0, 0, 64, 1024, 576},   {"resnet conv 128ch im2col", 0, 0, 128, 196, 1152},
    {"resnet conv 512ch, 64 positions", 0, 0, 512, 64, 4608}, {"winograd tiles 128x128x128", 0, 0, 128, 128, 128},
    {"winograd tiles 50x64x32 (cnn conv2)", 0, 0, 50, 64, 32},
  };
  const char *paths[] = {"blas", "avx512", "avx2"};
  for (size_t s = 0; s < sizeof S / sizeof S[0]; s++) {
    long M = S[s].M, N = S[s].N, K = S[s].K;
    int ta = S[s].ta, tb = S[s].tb;
    long lda = ta ? M : K, ldb = tb ? K : N;
    float *a = malloc(sizeof(float) * (size_t)(M * K)), *b = malloc(sizeof(float) * (size_t)(K * N));
    float *ref = malloc(sizeof(float) * (size_t)(M * N)), *c = malloc(sizeof(float) * (size_t)(M * N));
    for (long i = 0; i < M * K; i++) a[i] = (float)(i % 17) * 0.1f - 0.8f;
    for (long i = 0; i < K * N; i++) b[i] = (float)(i % 13) * 0.1f - 0.6f;
    /* enough calls per timing that each lasts a millisecond or more */
    long calls = (long)(2e6 / ((double)M * (double)N * (double)K / 1e3)) + 1;
    for (int p = 0; p < 3; p++) {
      double best = 1e30;
      int ok = 1;
      for (int r = 0; r < reps && ok; r++) {
        double t0 = cpu_now();
        for (long n = 0; n < calls && ok; n++) {
          float *out = p == 0 ? ref : c;
          if (p == 0)
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                        (int)K, 1.0f, a, (int)lda, b, (int)ldb, 0.0f, out, (int)N);
          else ok = dl_sgemm_block_on(paths[p], ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, out, N) == 1;
        }
        double t = (cpu_now() - t0) / (double)calls;
        if (t < best) best = t;
      }
      if (!ok) continue;                         /* a path this CPU cannot run */
      double diff = 0;
      for (long i = 0; p > 0 && i < M * N; i++) diff = fmax(diff, fabs((double)ref[i] - (double)c[i]));
      printf("{\"bench\":\"sgemm_kernels\",\"shape\":\"%s\",\"ta\":%d,\"tb\":%d,\"M\":%ld,\"N\":%ld,\"K\":%ld,"
             "\"path\":\"%s%s%s\",\"gflops\":%.1f,\"max_diff_to_blas\":%.3g}\n",
             S[s].what, ta, tb, M, N, K, paths[p], p == 0 ? " " : "", p == 0 ? openblas_get_corename() : "",
             2.0 * (double)M * (double)N * (double)K / best * 1e-9, diff);
    }
    free(a), free(b), free(ref), free(c);
  }
  return 0;
}

/* sgemm_mlp_step.c -- the sgemm calls of one MLP training step (784-1024-1024-10, batch
 * 256, as tests/bench/mlp.lua runs it), each timed three ways: OpenBLAS with 2 threads,
 * two single-threaded halves on two threads (what dl_gemm in engine/ops/gemm.c does), and
 * OpenBLAS with 1 thread. The sum of the best times is the step's GEMM floor: what
 * the step would cost if nothing but its products ran.
 * Build: cc -O2 -o build/sgemm_mlp_step tests/bench/sgemm_mlp_step.c -lopenblas -lpthread
 * Run:   OPENBLAS_THREAD_TIMEOUT=1 build/sgemm_mlp_step [reps=50]  (one line per shape, then the sums) */
/* See LICENSE */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_clock.h"

typedef struct {
  int ta, tb, M, N, K;
  const float *A, *B;
  float *C;
  int lda, ldb, ldc;
} product;

static void *run(void *arg) {
  const product *p = arg;
  cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans, p->M, p->N,
              p->K, 1.0f, p->A, p->lda, p->B, p->ldb, 0.0f, p->C, p->ldc);
  return NULL;
}

/* the two halves dl_gemm gives its two pool threads: rows of C if M >= N, else columns,
 * the cut rounded up to a multiple of 16 */
static void run_split(const product *p) {
  product a = *p, b = *p;
  if (p->M >= p->N) {
    int h = (p->M / 2 + 15) / 16 * 16;
    a.M = h;
    b.M = p->M - h;
    b.A = p->A + (p->ta ? h : (long)h * p->lda);
    b.C = p->C + (long)h * p->ldc;
  } else {
    int h = (p->N / 2 + 15) / 16 * 16;
    a.N = h;
    b.N = p->N - h;
    b.B = p->B + (p->tb ? (long)h * p->ldb : h);
    b.C = p->C + h;
  }
  pthread_t t;
  pthread_create(&t, NULL, run, &b);
  run(&a);
  pthread_join(t, NULL);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 50;
  /* forward: x W1^T, h1 W2^T, h2 W3^T; backward: dW3, dh2, dW2, dh1, dW1 (no dx: the input needs none) */
  struct { const char *name; int ta, tb, M, N, K; } shapes[] = {
    {"fwd1 x.W1^T", 0, 1, 256, 1024, 784},   {"fwd2 h1.W2^T", 0, 1, 256, 1024, 1024},
    {"fwd3 h2.W3^T", 0, 1, 256, 10, 1024},   {"dW3 g^T.h2", 1, 0, 10, 1024, 256},
    {"dh2 g.W3", 0, 0, 256, 1024, 10},       {"dW2 g^T.h1", 1, 0, 1024, 1024, 256},
    {"dh1 g.W2", 0, 0, 256, 1024, 1024},     {"dW1 g^T.x", 1, 0, 1024, 784, 256},
  };
  int ns = (int)(sizeof shapes / sizeof shapes[0]);
  double sum[3] = {0, 0, 0}, flops = 0;
  const char *mode[3] = {"openblas-2", "split-2x1", "openblas-1"};
  for (int s = 0; s < ns; s++) {
    int ta = shapes[s].ta, tb = shapes[s].tb, M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
    float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)K * N);
    float *C = malloc(sizeof(float) * (size_t)M * N);
    if (!A || !B || !C) return 1;
    for (long i = 0; i < (long)M * K; i++) A[i] = (float)rand() / (float)RAND_MAX;
    for (long i = 0; i < (long)K * N; i++) B[i] = (float)rand() / (float)RAND_MAX;
    product p = {ta, tb, M, N, K, A, B, C, ta ? M : K, tb ? K : N, N};
    double f = 2.0 * M * N * K;
    flops += f;
    printf("%-14s %4d x %4d x %4d", shapes[s].name, M, N, K);
    for (int m = 0; m < 3; m++) {
      openblas_set_num_threads(m == 0 ? 2 : 1);
      double best = 1e30;
      for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        if (m == 1) run_split(&p);
        else run(&p);
        double t = bench_now() - t0;
        if (t < best) best = t;
      }
      sum[m] += best;
      printf("  %s %6.3f ms %5.1f GFLOP/s", mode[m], best * 1e3, f / best * 1e-9);
    }
    printf("\n");
    free(A);
    free(B);
    free(C);
  }
  for (int m = 0; m < 3; m++)
    printf("step total %s: %.2f ms, %.1f GFLOP/s, %.0f ex/s if nothing else ran\n", mode[m], sum[m] * 1e3,
           flops / sum[m] * 1e-9, 256 / sum[m]);
  return 0;
}

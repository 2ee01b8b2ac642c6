/* gemm.c -- matrix products split over the core's thread pool: float32 on dlua's own
 * kernels (sgemm.c, DLUA_GEMM), float64 (and float32 when DLUA_GEMM=blas) on OpenBLAS.
 *
 * OpenBLAS runs single-threaded here (dl.threads sets it to 1): a large
 * product C[M, N] = A[M, K] B[K, N] is cut into one block of rows (or of
 * columns, whichever dimension is longer) per pool thread, and each block is
 * one single-threaded product. Two reasons:
 *   - OpenBLAS' own workers spin on sched_yield after every call; on two
 *     cores they then fight the pool's im2col, pooling and elementwise work
 *     for the same cores (measured: ~30% of a CNN step in the scheduler).
 *   - One set of threads for everything, so `dl.threads(n)` means n.
 * The split never cuts k, so with the own kernels (one fma chain per element in
 * k order) results are bit-identical at any thread count; with OpenBLAS they
 * are bit-identical run to run at a fixed count and differ across counts in the
 * last bits (its edge kernels sum a block in another order).
 */
/* See LICENSE */
#include "ops/ops.h"
#include "ops/sgemm.h"

#include <cblas.h>
#include <string.h>

typedef struct {
  dl_dtype d;
  int ta, tb;
  int64_t M, N, K;
  double alpha, beta;
  const void *A, *B;
  void *C;
  int64_t lda, ldb, ldc;
  const void *bias;         /* [N] written into each row of C's block first (beta is then 1), or NULL */
  int split_rows;           /* 1: blocks of rows of C, 0: blocks of columns */
  int64_t chunk;            /* rows or columns per task */
} gemm_job;

static void gemm_block(const gemm_job *j, int64_t m0, int64_t m, int64_t n0, int64_t n) {
  size_t es = dl_dtype_size(j->d);
  /* start of A's rows m0.. and B's columns n0.., as laid out (transposed or not) */
  const char *a = (const char *)j->A + (size_t)(j->ta ? m0 : m0 * j->lda) * es;
  const char *b = (const char *)j->B + (size_t)(j->tb ? n0 * j->ldb : n0) * es;
  char *c = (char *)j->C + (size_t)(m0 * j->ldc + n0) * es;
  if (j->bias)                 /* while this block of C is about to be read anyway */
    for (int64_t r = 0; r < m; r++)
      memcpy(c + (size_t)(r * j->ldc) * es, (const char *)j->bias + (size_t)n0 * es, (size_t)n * es);
  if (j->d == DL_F32 && dl_sgemm_block(j->ta, j->tb, m, n, j->K, (float)j->alpha, (const float *)a, j->lda,
                                        (const float *)b, j->ldb, (float)j->beta, (float *)c, j->ldc))
    return;
  CBLAS_TRANSPOSE ta = j->ta ? CblasTrans : CblasNoTrans, tb = j->tb ? CblasTrans : CblasNoTrans;
  if (j->d == DL_F32)
    cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)j->K, (float)j->alpha, (const float *)a, (int)j->lda,
                (const float *)b, (int)j->ldb, (float)j->beta, (float *)c, (int)j->ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)j->K, j->alpha, (const double *)a, (int)j->lda,
                (const double *)b, (int)j->ldb, j->beta, (double *)c, (int)j->ldc);
}

static void gemm_task(void *arg, int i) {
  const gemm_job *j = arg;
  int64_t len = j->split_rows ? j->M : j->N;
  int64_t s = (int64_t)i * j->chunk, e = s + j->chunk < len ? s + j->chunk : len;
  if (s >= e) return;
  if (j->split_rows) gemm_block(j, s, e - s, 0, j->N);
  else gemm_block(j, 0, j->M, s, e - s);
}

/* below this many multiply-adds one thread is faster than waking the pool */
#define GEMM_SPLIT_MIN (1 << 20)

static void gemm_run(dl_ctx *ctx, gemm_job j) {
  int64_t M = j.M, N = j.N, K = j.K;
  if (M == 0 || N == 0) return;
  size_t es = dl_dtype_size(j.d);
  if (K == 0) {                                  /* C = beta C, or the bias */
    for (int64_t i = 0; i < M; i++) {
      char *row = (char *)j.C + (size_t)(i * j.ldc) * es;
      if (j.bias) memcpy(row, j.bias, (size_t)N * es);
      else if (j.beta == 0) memset(row, 0, (size_t)N * es);
      else if (j.d == DL_F32) for (int64_t k = 0; k < N; k++) ((float *)row)[k] *= (float)j.beta;
      else for (int64_t k = 0; k < N; k++) ((double *)row)[k] *= j.beta;
    }
    return;
  }
  int threads = dl_pool_threads(ctx->pool);
  int64_t len = j.split_rows ? M : N;
  if (threads <= 1 || M * N * K < GEMM_SPLIT_MIN || len < 2 * threads) {
    gemm_block(&j, 0, M, 0, N);
    return;
  }
  /* equal blocks, rounded up to a multiple of 16 rows/columns (the kernels' panel widths) */
  int64_t chunk = (len + threads - 1) / threads;
  chunk = (chunk + 15) / 16 * 16;
  j.chunk = chunk;
  int tasks = (int)((len + chunk - 1) / chunk);
  dl_pool_run(ctx->pool, tasks, gemm_task, &j);
}

void dl_gemm(dl_ctx *ctx, dl_dtype d, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha,
             const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
  gemm_run(ctx, (gemm_job){d, ta, tb, M, N, K, alpha, beta, A, B, C, lda, ldb, ldc, NULL, M >= N, 0});
}

void dl_gemm_bias(dl_ctx *ctx, dl_dtype d, int ta, int tb, int64_t M, int64_t N, int64_t K, const void *A,
                  int64_t lda, const void *B, int64_t ldb, const void *bias, void *C, int64_t ldc) {
  gemm_run(ctx, (gemm_job){d, ta, tb, M, N, K, 1.0, 1.0, A, B, C, lda, ldb, ldc, bias, M >= N, 0});
}

void dl_sgemm_serial(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  gemm_job j = {DL_F32, ta, tb, M, N, K, alpha, beta, A, B, C, lda, ldb, ldc, NULL, 1, 0};
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; i++)
      for (int64_t k = 0; k < N; k++) C[i * ldc + k] = beta == 0 ? 0.0f : C[i * ldc + k] * beta;
    return;
  }
  gemm_block(&j, 0, M, 0, N);
}

void dl_gemm_serial(dl_dtype d, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const void *A,
                    int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
  gemm_job j = {d, ta, tb, M, N, K, alpha, beta, A, B, C, lda, ldb, ldc, NULL, 1, 0};
  if (M == 0 || N == 0) return;
  if (K == 0) {                                  /* C = beta C */
    for (int64_t i = 0; i < M; i++)
      for (int64_t k = 0; k < N; k++)
        if (d == DL_F32) ((float *)C)[i * ldc + k] = beta == 0 ? 0.0f : ((float *)C)[i * ldc + k] * (float)beta;
        else ((double *)C)[i * ldc + k] = beta == 0 ? 0.0 : ((double *)C)[i * ldc + k] * beta;
    return;
  }
  gemm_block(&j, 0, M, 0, N);
}

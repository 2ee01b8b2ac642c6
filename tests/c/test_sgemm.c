/* test_sgemm.c -- dlua's own float32 matrix product (ops/sgemm.c).
 *
 * The contract is exact: C[i][j] = beta C[i][j] (0 for beta 0, untouched for beta 1), then
 * fma(alpha A[i][k], B[k][j], C[i][j]) for k in order. So every path (avx512, avx2,
 * portable) must give the bits of that chain written out here with fmaf, on shapes that
 * exercise every edge: rows and columns that are not multiples of the tiles, k longer than a
 * packing block, more rows than an A block, more columns than a B block, transposed
 * operands, leading dimensions wider than the matrix, small operands read unpacked, alpha and
 * beta of every kind, and NaN in a C that beta 0 must not read. The values are also checked
 * against a float64 product, so a chain that is exact but wrong cannot pass.
 */
/* See LICENSE */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dl_test.h"
#include "ops/sgemm.h"

static uint64_t state = 0x9E3779B97F4A7C15ull;
static float next(void) {                       /* a fixed stream of values in [-1, 1) */
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(state >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

typedef struct {
  int ta, tb;
  int64_t M, N, K, pad;
  float alpha, beta;
} shape;

/* the contract, element by element */
static void reference(const shape *s, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                      int64_t ldc) {
  for (int64_t i = 0; i < s->M; i++)
    for (int64_t j = 0; j < s->N; j++) {
      float c = s->beta == 0.0f ? 0.0f : s->beta == 1.0f ? C[i * ldc + j] : s->beta * C[i * ldc + j];
      for (int64_t k = 0; k < s->K; k++) {
        float a = s->ta ? A[k * lda + i] : A[i * lda + k], b = s->tb ? B[j * ldb + k] : B[k * ldb + j];
        c = fmaf(s->alpha * a, b, c);
      }
      C[i * ldc + j] = c;
    }
}

static int check(const char *path, const shape *s) {
  int64_t ar = s->ta ? s->K : s->M, ac = s->ta ? s->M : s->K, br = s->tb ? s->N : s->K, bc = s->tb ? s->K : s->N;
  int64_t lda = ac + s->pad, ldb = bc + s->pad, ldc = s->N + s->pad;
  float *A = malloc(sizeof(float) * (size_t)(ar * lda)), *B = malloc(sizeof(float) * (size_t)(br * ldb));
  float *C0 = malloc(sizeof(float) * (size_t)(s->M * ldc)), *C = malloc(sizeof(float) * (size_t)(s->M * ldc));
  float *W = malloc(sizeof(float) * (size_t)(s->M * ldc));
  for (int64_t i = 0; i < ar * lda; i++) A[i] = next();
  for (int64_t i = 0; i < br * ldb; i++) B[i] = next();
  for (int64_t i = 0; i < s->M * ldc; i++) C0[i] = s->beta == 0.0f ? NAN : next();
  memcpy(C, C0, sizeof(float) * (size_t)(s->M * ldc));
  memcpy(W, C0, sizeof(float) * (size_t)(s->M * ldc));
  reference(s, A, lda, B, ldb, W, ldc);
  int r = dl_sgemm_block_on(path, s->ta, s->tb, s->M, s->N, s->K, s->alpha, A, lda, B, ldb, s->beta, C, ldc);
  int bad = 0;
  if (r == 1) {
    for (int64_t i = 0; i < s->M; i++)
      for (int64_t j = 0; j < ldc; j++) {
        float got = C[i * ldc + j], want = j < s->N ? W[i * ldc + j] : C0[i * ldc + j];
        if (memcmp(&got, &want, sizeof got) != 0 && !(isnan(got) && isnan(want))) bad++;
      }
    /* and the chain is the product: against float64 */
    double worst = 0;
    for (int64_t i = 0; i < s->M; i++)
      for (int64_t j = 0; j < s->N; j++) {
        double d = s->beta == 0.0f ? 0.0 : (double)s->beta * (double)C0[i * ldc + j];
        for (int64_t k = 0; k < s->K; k++)
          d += (double)s->alpha * (double)(s->ta ? A[k * lda + i] : A[i * lda + k]) *
               (double)(s->tb ? B[j * ldb + k] : B[k * ldb + j]);
        double e = fabs(d - (double)C[i * ldc + j]);
        if (e > worst) worst = e;
      }
    DL_CHECK(worst <= 1e-5 * (double)s->K + 1e-6);
    if (bad)
      fprintf(stderr, "%s: ta %d tb %d %lldx%lldx%lld pad %lld alpha %g beta %g: %d elements differ from the chain\n",
              path, s->ta, s->tb, (long long)s->M, (long long)s->N, (long long)s->K, (long long)s->pad,
              (double)s->alpha, (double)s->beta, bad);
    DL_CHECK(bad == 0);
  }
  free(A), free(B), free(C0), free(C), free(W);
  return r;
}

int main(void) {
  static const shape shapes[] = {
    {0, 0, 1, 1, 1, 0, 1, 0},         {0, 0, 12, 32, 7, 0, 1, 0},       {0, 0, 13, 33, 5, 3, 1, 0},
    {0, 0, 50, 64, 32, 0, 1, 0},      {1, 0, 32, 64, 50, 0, 1, 1},      {0, 1, 64, 10, 100, 1, 1, 1},
    {0, 1, 37, 45, 300, 2, 1, 0},     {1, 1, 29, 31, 257, 0, 0.5f, 0},  {0, 0, 150, 70, 513, 5, 1, 2.5f},
    {1, 0, 7, 1100, 40, 0, -2, 1},    {0, 0, 300, 40, 20, 0, 1, -1},   {1, 1, 145, 17, 3, 4, 1, 0.25f},
    {0, 0, 3, 1030, 260, 1, 1, 0},    {0, 1, 160, 200, 130, 0, 1, 1},   {1, 0, 6, 16, 1, 0, 1, 1},
  };
  const char *paths[] = {"avx512", "avx2", "portable"};
  int ran[3] = {0, 0, 0};
  for (int p = 0; p < 3; p++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      if (check(paths[p], &shapes[i]) == 1) ran[p]++;
  DL_CHECK(ran[2] == (int)(sizeof shapes / sizeof shapes[0]));     /* portable runs everywhere */
  DL_CHECK(dl_sgemm_block_on("blas", 0, 0, 1, 1, 1, 1, NULL, 1, NULL, 1, 0, NULL, 1) == -1);
  DL_CHECK(dl_sgemm_block_on("nope", 0, 0, 1, 1, 1, 1, NULL, 1, NULL, 1, 0, NULL, 1) == -1);
  fprintf(stderr, "paths run: avx512 %d, avx2 %d, portable %d (of %d shapes)\n", ran[0], ran[1], ran[2],
          (int)(sizeof shapes / sizeof shapes[0]));
  DL_TEST_END();
}

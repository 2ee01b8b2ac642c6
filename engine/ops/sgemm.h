/* sgemm.h -- dlua's own float32 matrix product on one thread (sgemm.c): kernels chosen
 * for the CPU (AVX-512, AVX2+FMA), one fused multiply-add chain per element in k order, so
 * every path and every thread split gives the same bits. gemm.c calls it for float32. */
/* See LICENSE */
#ifndef DL_SGEMM_H
#define DL_SGEMM_H

#include <stddef.h>
#include <stdint.h>

/* C = alpha op(A) op(B) + beta C, row-major (op = transpose when ta/tb), K >= 1, on the
 * calling thread. Returns 0 without touching C when the chosen path is OpenBLAS's (or its
 * packing buffers cannot be had): the caller then calls cblas_sgemm. */
int dl_sgemm_block(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* the same on the named path ("avx512", "avx2", "portable"): for the same-bits tests;
 * -1 when this build or CPU has no such path */
int dl_sgemm_block_on(const char *path, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                      int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* the path that runs: "avx512", "avx2", "portable" or "blas" (DLUA_GEMM, else the CPU's
 * widest); dl_sgemm_own(): 1 unless "blas" */
const char *dl_sgemm_path(void);
int dl_sgemm_own(void);

/* GFLOP/s the path measured when auto chose among the own kernels (one 192 x 256 x 256
 * product, CPU time), 0 when it was not measured (a forced path, or one the CPU lacks) */
double dl_sgemm_rate(const char *path);

/* 1 with a message in msg when DLUA_GEMM names no path of this build, or one this CPU
 * cannot run (the module refuses to load then), else 0 */
int dl_sgemm_env_error(char *msg, size_t cap);

#endif

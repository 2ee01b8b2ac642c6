/* test_core.c -- allocator, RNG, thread pool, tensors and autograd, and the measurement kernel
 * choices time with (dl_cpu_best_seconds), from C. */
/* See LICENSE */
#include <limits.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "core/env.h"
#include "dl_test.h"
#include "ops/ops.h"

static void test_alloc(void) {
  dl_ctx *ctx = dl_ctx_new();
  void *p = dl_alloc(ctx, 100);
  DL_CHECK(p && ((uintptr_t)p % 64) == 0);
  DL_CHECK(ctx->mem.in_use == 128);
  dl_free(ctx, p, 100);
  DL_CHECK(ctx->mem.in_use == 0);
  uint64_t sys = ctx->mem.system_allocs;
  void *q = dl_alloc(ctx, 120);               /* same class: reused, no system call */
  DL_CHECK(q == p);
  DL_CHECK(ctx->mem.system_allocs == sys);
  dl_free(ctx, q, 120);
  ctx->mem.limit = 1000;
  DL_CHECK(dl_alloc(ctx, 2000) == NULL);
  DL_CHECK(strstr(ctx->err, "out of memory: requested 2000 bytes, in use 0 bytes, limit 1000 bytes") != NULL);
  DL_CHECK(ctx->oom == 1);
  ctx->mem.limit = 0;
  dl_ctx_free(ctx);
}

static void test_rng(void) {
  /* Philox-4x32-10 known-answer vector (Random123 kat_vectors: ctr 0, key 0) */
  uint32_t out[4];
  dl_philox(0, 0, out);
  DL_CHECK(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du && out[2] == 0xbc57ac4cu && out[3] == 0x9b00dbd8u);
  float a[10], b[10];
  dl_rng_uniform(7, 3, a, 10);
  dl_rng_uniform(7, 3, b, 10);
  DL_CHECK(memcmp(a, b, sizeof a) == 0);
  /* counter-based: starting one block later skips exactly four values */
  dl_rng_uniform(7, 4, b, 6);
  DL_CHECK(memcmp(a + 4, b, 6 * sizeof(float)) == 0);
  for (int i = 0; i < 10; i++) DL_CHECK(a[i] >= 0 && a[i] < 1);
}

typedef struct { int64_t sum[16]; } pool_arg;
static void pool_task(void *arg, int i) {
  pool_arg *p = arg;
  int64_t s = 0;
  for (int k = 0; k < 100000; k++) s += (int64_t)k * (i + 1);
  p->sum[i] = s;
}

/* every task of every run exactly once, whether the workers poll or sleep between
 * runs and whether the caller polls or sleeps waiting for them */
typedef struct { atomic_int hits[8]; int sleep_us; } count_arg;
static void count_task(void *arg, int i) {
  count_arg *c = arg;
  if (c->sleep_us) {
    struct timespec ts = {0, (long)c->sleep_us * 1000};
    nanosleep(&ts, NULL);
  }
  atomic_fetch_add(&c->hits[i], 1);
}

static void pool_rounds(const char *spin_us, int threads) {
  setenv("DLUA_POOL_SPIN_US", spin_us, 1);
  dl_pool *p = dl_pool_new(threads);
  unsetenv("DLUA_POOL_SPIN_US");
  DL_CHECK(dl_pool_threads(p) == threads);
  for (int round = 0; round < 50; round++) {
    pool_arg a;
    memset(&a, 0, sizeof a);
    dl_pool_run(p, 16, pool_task, &a);
    for (int i = 0; i < 16; i++) DL_CHECK(a.sum[i] == (int64_t)4999950000 * (i + 1));
  }
  /* back-to-back tiny runs (workers caught polling), runs after a pause longer than
   * the poll (workers asleep), and tasks longer than the poll (the caller asleep) */
  for (int round = 0; round < 3000; round++) {
    count_arg c = {.sleep_us = round % 500 == 7 ? 2000 : 0};
    for (int i = 0; i < 8; i++) atomic_init(&c.hits[i], 0);
    if (round % 1000 == 3) {
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
    }
    int n = 2 + round % 7;
    dl_pool_run(p, n, count_task, &c);
    for (int i = 0; i < 8; i++) DL_CHECK(atomic_load(&c.hits[i]) == (i < n));
  }
  dl_pool_free(p);
}

static void test_pool(void) {
  /* 2 threads poll on any machine with 2 cores; more threads than cores never poll */
  pool_rounds("50", 2);        /* a short poll: waits often sleep */
  pool_rounds("junk", 2);      /* malformed: the default (1000) */
  pool_rounds("0", 3);         /* never polls: every wait sleeps */
  pool_rounds("1000000", 2);   /* polls for up to a second: no wait sleeps */
  pool_rounds("junk", 3);      /* malformed: the default */
}

static void test_tensor_autograd(void) {
  dl_ctx *ctx = dl_ctx_new();
  int64_t sh[2] = {2, 3};
  dl_tensor *x = dl_tensor_new_full(ctx, DL_F32, 2, sh, 2);
  x->requires_grad = 1;
  dl_tensor *y = dl_binary(ctx, DL_MUL, x, x);          /* y = x^2 */
  dl_tensor *s = dl_reduce(ctx, DL_RSUM, y, 0, 0, 0, NULL);
  DL_CHECK_CLOSE(dl_get_flat(s, 0), 24, 1e-6);
  DL_CHECK(dl_backward(ctx, s, NULL, 0) == 0);
  DL_CHECK(x->grad != NULL);
  for (int i = 0; i < 6; i++) DL_CHECK_CLOSE(dl_get_flat(x->grad, i), 4, 1e-6);
  /* matmul shape error names both shapes */
  int64_t sa[2] = {3, 4}, sb[2] = {5, 6};
  dl_tensor *a = dl_tensor_new_zeros(ctx, DL_F32, 2, sa), *b = dl_tensor_new_zeros(ctx, DL_F32, 2, sb);
  DL_CHECK(dl_matmul(ctx, a, b) == NULL);
  DL_CHECK(strcmp(ctx->err, "matmul: shapes [3, 4] and [5, 6] do not match (4 != 5)") == 0);
  dl_tensor_release(a);
  dl_tensor_release(b);
  dl_tensor_release(s);
  dl_tensor_release(y);
  dl_tensor_release(x);
  DL_CHECK(ctx->mem.in_use == 0);                       /* everything returned */
  dl_ctx_free(ctx);
}

/* Fails allocation N = 1, 2, ... of a forward+backward: each run must fail
 * cleanly (NULL / -1 with a message) and leave no bytes in use. */
static void test_alloc_fail_sweep(void) {
  int completed = 0;
  for (uint64_t n = 1; n < 200 && !completed; n++) {
    dl_ctx *ctx = dl_ctx_new();
    ctx->mem.fail_at = n;
    int64_t sh[2] = {4, 5}, sw[2] = {5, 3};
    dl_tensor *x = dl_tensor_new_rand(ctx, DL_F32, 2, sh, 1);
    dl_tensor *w = x ? dl_tensor_new_rand(ctx, DL_F32, 2, sw, 1) : NULL;
    if (w) w->requires_grad = 1;
    dl_tensor *h = w ? dl_matmul(ctx, x, w) : NULL;
    dl_tensor *t = h ? dl_unary(ctx, DL_TANH, h) : NULL;
    dl_tensor *l = t ? dl_softmax(ctx, t, 1, 1) : NULL;
    dl_tensor *s = l ? dl_reduce(ctx, DL_RMEAN, l, 0, 0, 0, NULL) : NULL;
    int rc = s ? dl_backward(ctx, s, NULL, 0) : -1;
    if (rc == 0 && ctx->mem.allocs < n) completed = 1;
    if (rc != 0) DL_CHECK(ctx->err[0] != 0);
    dl_tensor_release(s);
    dl_tensor_release(l);
    dl_tensor_release(t);
    dl_tensor_release(h);
    dl_tensor_release(w);
    dl_tensor_release(x);
    if (ctx->mem.in_use != 0) {
      fprintf(stderr, "alloc-fail sweep: failing allocation %llu left %zu bytes in use\n",
              (unsigned long long)n, ctx->mem.in_use);
      DL_CHECK(ctx->mem.in_use == 0);
    }
    dl_ctx_free(ctx);
  }
  DL_CHECK(completed);
}

/* dl_cpu_best_seconds' callbacks: work that takes measurable CPU time, and one that fails on
 * its second call */
static int busy(void *arg) {
  volatile double *x = arg;
  for (int i = 0; i < 200000; i++) *x = *x * 1.0000001 + 1e-9;
  return 1;
}

static int fails_second(void *arg) {
  int *calls = arg;
  return ++*calls < 2;
}

static void test_best_seconds(void) {
  volatile double x = 1;
  double t = dl_cpu_best_seconds(busy, (void *)&x, 3);
  DL_CHECK(t > 0 && t < 1);
  int calls = 0;
  DL_CHECK(dl_cpu_best_seconds(fails_second, &calls, 3) == 0);   /* a failed call: not measured */
  DL_CHECK(calls == 2);                                          /* and no call after it */
  calls = 0;
  DL_CHECK(dl_cpu_best_seconds(fails_second, &calls, 0) == 0 && calls == 0);
}

/* the switch readers: each value either read exactly or refused, never bent to a default */
static void test_env(void) {
  const char *N = "DL_TEST_SWITCH";
  char msg[200];
  unsetenv(N);
  DL_CHECK(dl_env_flag(N, 1) == 1 && dl_env_long(N, 0, 9, 7) == 7 && !dl_env_flag_error(N, msg, sizeof msg));
  static const struct { const char *v; int flag; long num; } cases[] = {
    {"", 1, 7}, {"0", 0, 0}, {"1", 1, 1}, {"9", -1, 9}, {"10", -1, -1}, {"00", -1, 0}, {" 1", -1, -1},
    {"1 ", -1, -1}, {"-1", -1, -1}, {"+1", -1, -1}, {"on", -1, -1}, {"1e3", -1, -1},
    {"99999999999999999999999", -1, -1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    setenv(N, cases[i].v, 1);
    DL_CHECK(dl_env_flag(N, 1) == cases[i].flag);
    DL_CHECK(dl_env_long(N, 0, 9, 7) == cases[i].num);
    DL_CHECK(dl_env_flag_error(N, msg, sizeof msg) == (cases[i].flag < 0));
    DL_CHECK(dl_env_long_error(N, 0, 9, msg, sizeof msg) == (cases[i].num < 0));
  }
  setenv(N, "3", 1);
  DL_CHECK(dl_env_long(N, 4, 9, 7) == -1 && dl_env_long(N, 3, 3, 7) == 3);      /* below lo; lo = hi */
  DL_CHECK(dl_env_long_error(N, 4, 9, msg, sizeof msg) && strcmp(msg, "DL_TEST_SWITCH=3: not a whole number from 4 to 9") == 0);
  setenv(N, "yes", 1);
  DL_CHECK(dl_env_flag_error(N, msg, sizeof msg) && strcmp(msg, "DL_TEST_SWITCH=yes: not a switch value (valid: 0, 1)") == 0);
  setenv(N, "9223372036854775807", 1);
  DL_CHECK(dl_env_long(N, 0, LONG_MAX, 7) == LONG_MAX);   /* hi itself, no overflow */
  setenv(N, "9223372036854775808", 1);
  DL_CHECK(dl_env_long(N, 0, LONG_MAX, 7) == -1);
  unsetenv(N);
}

int main(void) {
  test_env();
  test_best_seconds();
  test_alloc();
  test_rng();
  test_pool();
  test_tensor_autograd();
  test_alloc_fail_sweep();
  DL_TEST_END();
}

/* test_batchnorm.c -- the batch-norm stages and the cross-rank reducer hook from C.
 *
 * Two "ranks" run as two threads, each with its own context and half of the
 * batch, joined by a reducer that sums their buffers behind a barrier (what an
 * MPI allreduce does). Their outputs, input gradients, summed parameter
 * gradients and running averages must equal one process running all replicas
 * with sync on. Also: the centred sums around a centre that float32 cannot
 * represent, and a failing reducer leaving the running averages untouched.
 */
/* See LICENSE */
#include <stdlib.h>
#include <string.h>

#include "ops/batchnorm.h"
#include "dl_test.h"

enum { RL = 2, NR = 20, CH = 3, HH = 2, WW = 3, K = 8 };   /* replicas per rank, examples per replica */

typedef struct {
  pthread_barrier_t bar;
  double *buf[2];
  double *tmp[2];
  int calls[2];
} fake_world;

typedef struct {
  fake_world *w;
  int rank;
} rank_ud;

static int fake_sum(void *ud, dl_ctx *ctx, double *buf, int64_t n) {
  (void)ctx;
  rank_ud *r = ud;
  fake_world *w = r->w;
  w->buf[r->rank] = buf;
  w->calls[r->rank]++;
  pthread_barrier_wait(&w->bar);
  double *t = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) t[i] = w->buf[0][i] + w->buf[1][i];
  pthread_barrier_wait(&w->bar);             /* both have read both buffers */
  memcpy(buf, t, sizeof(double) * (size_t)n);
  free(t);
  return 0;
}

static int failing_sum(void *ud, dl_ctx *ctx, double *buf, int64_t n) {
  (void)ud; (void)buf; (void)n;
  dl_fail(ctx, "allreduce: rank 1 is gone");
  return -1;
}

static float det_value(int64_t i, int which) {     /* deterministic pseudo-random data */
  uint32_t h = (uint32_t)i * 2654435761u + (uint32_t)which * 40503u;
  h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
  return (float)(h % 2000) / 500.0f - 2.0f + (float)which;
}

typedef struct {
  int rank;                 /* -1: the single-process reference over both ranks' replicas */
  const dl_bn_reducer *red;
  float *y, *dx, *dg, *db, *rm, *rv;   /* results, sized for the caller's share */
  int ok;
} run_arg;

static void *run_rank(void *p) {
  run_arg *a = p;
  dl_ctx *ctx = dl_ctx_new();
  int64_t R = a->rank < 0 ? 2 * RL : RL, N = R * NR, off = a->rank < 0 ? 0 : a->rank * RL * NR * CH * HH * WW;
  int64_t sh[4] = {N, CH, HH, WW}, csh[1] = {CH}, rsh[2] = {R, CH};
  dl_tensor *x = dl_tensor_new_empty(ctx, DL_F32, 4, sh), *dy = dl_tensor_new_empty(ctx, DL_F32, 4, sh);
  dl_tensor *w = dl_tensor_new_empty(ctx, DL_F32, 1, csh), *b = dl_tensor_new_empty(ctx, DL_F32, 1, csh);
  dl_tensor *rm = dl_tensor_new_zeros(ctx, DL_F32, 2, rsh), *rv = dl_tensor_new_full(ctx, DL_F32, 2, rsh, 1);
  float *xp = x->st->data, *gp = dy->st->data;
  for (int64_t i = 0; i < dl_numel(x); i++) { xp[i] = det_value(off + i, 0); gp[i] = det_value(off + i, 1); }
  for (int c = 0; c < CH; c++) {
    ((float *)w->st->data)[c] = 0.5f + (float)c;
    ((float *)b->st->data)[c] = -0.25f * (float)c;
  }
  x->requires_grad = w->requires_grad = b->requires_grad = 1;
  dl_bn_opts o = dl_bn_defaults();
  o.replicas = R; o.virtual_batch = K; o.sync = 1; o.reducer = a->red;
  dl_tensor *y = dl_batch_norm(ctx, x, w, b, rm, rv, &o);
  a->ok = y && dl_backward(ctx, y, dy, 0) == 0;
  if (a->ok) {
    memcpy(a->y, dl_data(y), sizeof(float) * (size_t)dl_numel(y));
    memcpy(a->dx, dl_data(x->grad), sizeof(float) * (size_t)dl_numel(x));
    memcpy(a->dg, dl_data(w->grad), sizeof(float) * CH);
    memcpy(a->db, dl_data(b->grad), sizeof(float) * CH);
    memcpy(a->rm, dl_data(rm), sizeof(float) * (size_t)(R * CH));
    memcpy(a->rv, dl_data(rv), sizeof(float) * (size_t)(R * CH));
  }
  dl_tensor_release(y); dl_tensor_release(x); dl_tensor_release(dy); dl_tensor_release(w);
  dl_tensor_release(b); dl_tensor_release(rm); dl_tensor_release(rv);
  DL_CHECK(ctx->mem.in_use == 0);
  dl_ctx_free(ctx);
  return NULL;
}

enum { NALL = 2 * RL * NR * CH * HH * WW, NHALF = NALL / 2 };

static void test_two_ranks(void) {
  static float ry[NALL], rdx[NALL], rdg[CH], rdb[CH], rrm[2 * RL * CH], rrv[2 * RL * CH];
  static float y[2][NHALF], dx[2][NHALF], dg[2][CH], db[2][CH], rm[2][RL * CH], rv[2][RL * CH];
  run_arg ref = {-1, NULL, ry, rdx, rdg, rdb, rrm, rrv, 0};
  run_rank(&ref);
  DL_CHECK(ref.ok);
  fake_world w;
  memset(&w, 0, sizeof w);
  pthread_barrier_init(&w.bar, NULL, 2);
  rank_ud ud[2] = {{&w, 0}, {&w, 1}};
  dl_bn_reducer red[2] = {{fake_sum, &ud[0]}, {fake_sum, &ud[1]}};
  run_arg ra[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    run_arg a = {r, &red[r], y[r], dx[r], dg[r], db[r], rm[r], rv[r], 0};
    ra[r] = a;
    pthread_create(&th[r], NULL, run_rank, &ra[r]);
  }
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&w.bar);
  DL_CHECK(ra[0].ok && ra[1].ok);
  DL_CHECK(w.calls[0] == 3 && w.calls[1] == 3);     /* two in the forward, one in the backward */
  double ey = 0, edx = 0, eg = 0, er = 0;
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < NHALF; i++) {
      ey = fmax(ey, fabs((double)y[r][i] - (double)ry[r * NHALF + i]));
      edx = fmax(edx, fabs((double)dx[r][i] - (double)rdx[r * NHALF + i]));
    }
  for (int c = 0; c < CH; c++) {
    eg = fmax(eg, fabs((double)dg[0][c] + (double)dg[1][c] - (double)rdg[c]));
    eg = fmax(eg, fabs((double)db[0][c] + (double)db[1][c] - (double)rdb[c]));
    for (int r = 0; r < 2; r++)
      for (int q = 0; q < RL; q++) {
        er = fmax(er, fabs((double)rm[r][q * CH + c] - (double)rrm[c]));
        er = fmax(er, fabs((double)rv[r][q * CH + c] - (double)rrv[c]));
      }
  }
  DL_CHECK(ey < 1e-5);
  DL_CHECK(edx < 1e-5);
  DL_CHECK(eg < 1e-4);
  DL_CHECK(er < 1e-6);
  DL_CHECK(rrm[0] != 0.0f);                         /* the averages moved */
}

static void test_failing_reducer(void) {
  dl_ctx *ctx = dl_ctx_new();
  int64_t sh[2] = {8, 2}, rsh[1] = {2};
  dl_tensor *x = dl_tensor_new_rand(ctx, DL_F32, 2, sh, 1);
  dl_tensor *rm = dl_tensor_new_zeros(ctx, DL_F32, 1, rsh), *rv = dl_tensor_new_full(ctx, DL_F32, 1, rsh, 1);
  dl_bn_reducer red = {failing_sum, NULL};
  dl_bn_opts o = dl_bn_defaults();
  o.sync = 1;
  o.reducer = &red;
  DL_CHECK(dl_batch_norm(ctx, x, NULL, NULL, rm, rv, &o) == NULL);
  DL_CHECK(strcmp(ctx->err, "allreduce: rank 1 is gone") == 0);
  DL_CHECK(((float *)rm->st->data)[0] == 0.0f && ((float *)rv->st->data)[1] == 1.0f);
  dl_tensor_release(x); dl_tensor_release(rm); dl_tensor_release(rv);
  DL_CHECK(ctx->mem.in_use == 0);
  dl_ctx_free(ctx);
}

static void test_centred_sums(void) {
  /* a centre float32 cannot hold: the float rows are centred on (float)m, and the
   * sums must still be those around m itself */
  dl_ctx *ctx = dl_ctx_new();
  dl_bn_geom g;
  DL_CHECK(dl_bn_geom_init(ctx, &g, 5, 1, 7, 0, 1, 0, 0) == 0);
  float x[35];
  for (int i = 0; i < 35; i++) x[i] = 1000.0f + (float)i * 0.125f;
  double m = 1001.0 + 1e-5, d1 = 0, d2 = 0, e1 = 0, e2 = 0;
  dl_bn_centered_sums(&g, DL_F32, x, &m, &d1, &d2, 0, 1);
  for (int i = 0; i < 35; i++) { e1 += (double)x[i] - m; e2 += ((double)x[i] - m) * ((double)x[i] - m); }
  DL_CHECK_CLOSE(d1, e1, 1e-9);
  DL_CHECK_CLOSE(d2, e2, 1e-7);
  /* remainder rule: 200 with k = 64 -> 64, 64, 72; shards below k are one group */
  DL_CHECK(dl_bn_geom_init(ctx, &g, 400, 1, 1, 0, 2, 64, 1) == 0);
  int64_t s, n;
  DL_CHECK(g.G == 3 && g.S == 3);
  dl_bn_group(&g, 2, &s, &n);
  DL_CHECK(s == 128 && n == 72);
  dl_bn_group(&g, 5, &s, &n);
  DL_CHECK(s == 328 && n == 72 && dl_bn_group_set(&g, 5) == 2);
  DL_CHECK(dl_bn_set_count(&g, 2) == 144);
  DL_CHECK(dl_bn_geom_init(ctx, &g, 10, 1, 1, 0, 1, 64, 0) == 0 && g.G == 1 && g.k == 10);
  DL_CHECK(dl_bn_geom_init(ctx, &g, 10, 1, 1, 0, 4, 0, 0) == -1);
  DL_CHECK(strstr(ctx->err, "10 examples does not split into 4 equal replicas") != NULL);
  dl_ctx_free(ctx);
}

int main(void) {
  test_centred_sums();
  test_failing_reducer();
  test_two_ranks();
  DL_TEST_END();
}

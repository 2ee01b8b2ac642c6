/* conv_winograd.c -- stride-1 3x3 and 5x5 convolutions by Winograd's minimal filtering.
 *
 * F(m x m, r x r) computes each m x m tile of the output from an a x a tile d of the
 * zero-padded input, a = m + r - 1:
 *     Y = A^T [ (G w G^T) (.) (B^T d B) ] A
 * Summed over the input channels, the elementwise product is a*a independent products
 * M_xi [T, O] = V_xi [T, C] U_xi [C, O] over T tiles, one sgemm each. F(3x3, 5x5) does 49
 * multiplies for 9 outputs where the direct form does 225 (4.6x fewer); F(4x4, 3x3) does
 * 36 for 16 where it does 144 (4x). Outputs under 8 wide take F(2x2, 5x5) (36 for 4) and
 * F(2x2, 3x3) (16 for 4). The matrices come from the Toom-Cook construction on a - 1 finite
 * points (see points()) and infinity, computed in double here: G and A evaluate polynomials
 * at the points, B is the inverse of the a x a evaluation (interpolation) matrix. Against a
 * float64 reference on He-initialised layers over ReLU outputs the output's error is 2-3x
 * the im2col path's for the 6-point tiles and 4.5x for F(3x3, 5x5) (conv_winograd_spec).
 * F(4x4, 5x5) (64 for 16) measured 12x, and was no faster on 14x14 outputs (the CNN's
 * conv2: 16 tiles of 64 against 25 of 49); it is faster where 4 divides the output (16x16:
 * 12%, 28x28: 20-40% on one layer's step, 1 thread), at that error.
 *
 * The backward is the exact adjoint of that computation, so its gradients are the forward's
 * finite differences: dM = A dY A^T per tile, then dU_xi = V_xi^T dM_xi (the weight gradient
 * is G^T dU G) and dV_xi = dM_xi U_xi^T (the input gradient is B dV B^T, added back over the
 * overlapping input tiles).
 *
 * Lanes are 16 channels: every transform works on 16-channel vectors, the input of one
 * example and channel block is packed into a zero-padded [Hq, Wq, 16] plane, and V and M are
 * [a*a, T, C] and [a*a, T, O]. Work runs in blocks of examples, each block in three pool runs:
 * the transforms over (example, channel block) pairs, the products over xi, the transforms
 * back. No sum is split over tasks, and the weight gradient's products accumulate over
 * blocks in block order, so results are bit-identical at any thread count.
 *
 * This file holds the matrices, the work split and the entry points; the vector work is
 * conv_winograd_kern.h, compiled for AVX-512 and for AVX2 with FMA (16 lanes as one zmm or
 * two ymm, simd16.h), which give the same bits: the path conv_simd chose runs
 * (DLUA_CONV_SIMD).
 */
/* See LICENSE */
#include "ops/conv_winograd.h"

#include "core/cpu.h"
#include "core/env.h"
#include "ops/conv_simd.h"
#include "ops/ops.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXAMPLE_FLOATS ((int64_t)64 << 20)

static int wino_off;
static pthread_once_t wino_once = PTHREAD_ONCE_INIT;

static void wino_probe(void) {
  wino_off = dl_env_flag("DLUA_CONV_WINOGRAD", 1) == 0;     /* malformed: refused at load */
}

int dl_wino_env_error(char *msg, size_t cap) { return dl_env_flag_error("DLUA_CONV_WINOGRAD", msg, cap); }

int dl_wino_enabled(void) {
  pthread_once(&wino_once, wino_probe);
  return DL_SIMD_BUILD && !wino_off && dl_conv_simd() != DL_CONV_PORTABLE;
}

int dl_wino_fits(const dl_wino_geom *g) {
  if (!dl_wino_enabled()) return 0;
  if (g->k != 3 && g->k != 5) return 0;
  if (g->C % DL_WINO_LANES || g->O % DL_WINO_LANES || g->C < DL_WINO_LANES || g->O < DL_WINO_LANES) return 0;
  /* gathers and scatters index a channel block's planes with 32-bit offsets */
  if (g->H * g->W > INT32_MAX / DL_WINO_LANES || g->Ho * g->Wo > INT32_MAX / DL_WINO_LANES) return 0;
  /* a block holds at least one example's V and M: 36 floats per 4 outputs and channel at
   * most; huge images stay with im2col, whose buffers grow with the kernel instead */
  int64_t per_channel = (g->Ho / 2 + 1) * (g->Wo / 2 + 1) * 36;     /* < 2^33: Ho, Wo < 2^27 */
  return g->C <= MAX_EXAMPLE_FLOATS / per_channel && g->O <= MAX_EXAMPLE_FLOATS / per_channel &&
         g->C + g->O <= MAX_EXAMPLE_FLOATS / per_channel;
}

#if DL_SIMD_BUILD

/* the output tile: F(4x4, 3x3) and F(3x3, 5x5); F(2x2, r x r) when the output is small */
static int tile_m(const dl_wino_geom *g) {
  if (g->Ho < 8 || g->Wo < 8) return 2;
  return g->k == 5 ? 3 : 4;
}

/* ------------------------------------------------------------ the matrices */

/* The finite points of an a-point tile: 0 and pairs +-p when a is even, pairs only when it is
 * odd. 6 points (F(4x4, 3x3), F(2x2, 5x5)) use 3/4 and 3/2 rather than 1 and 2: the float32
 * error of the whole convolution against a float64 reference drops 5x for F(4x4, 3x3) and 3x
 * for F(2x2, 5x5), to 2-3x the im2col path's. F(3x3, 5x5)'s 7 points +-5/16, +-7/8, +-7/4 give
 * 4.5x im2col's error, where F(4x4, 5x5) on 8 (0, +-1/2, +-1, +-2; no other symmetric set of
 * dyadic points cut that by more than 15%) gave 12x. Measured over grids of dyadic pairs
 * (steps of 1/32 near the optimum); every power of these points up to the 4th, all G needs,
 * is exact in float32. */
static const double *points(int a) {
  static const double p4[DL_WINO_AMAX - 1] = {0, 1, -1};
  static const double p6[DL_WINO_AMAX - 1] = {0, 0.75, -0.75, 1.5, -1.5};
  static const double p7[DL_WINO_AMAX - 1] = {0.3125, -0.3125, 0.875, -0.875, 1.75, -1.75};
  return a == 4 ? p4 : a == 6 ? p6 : p7;
}

static void evaluation(int rows, int n, double *E) {
  const double *pts = points(rows);
  for (int p = 0; p < rows; p++) {
    double v = 1;
    for (int i = 0; i < n; i++) {
      E[p * n + i] = p < rows - 1 ? v : (i == n - 1);
      v *= p < rows - 1 ? pts[p] : 0;
    }
  }
}

/* inv = E^-1 by Gauss-Jordan with partial pivoting (E is a nonsingular Vandermonde matrix) */
static void invert(int n, double *E, double *inv) {
  for (int i = 0; i < n * n; i++) inv[i] = (i / n == i % n);
  for (int c = 0; c < n; c++) {
    int piv = c;
    for (int r = c + 1; r < n; r++)
      if (__builtin_fabs(E[r * n + c]) > __builtin_fabs(E[piv * n + c])) piv = r;
    for (int k = 0; k < n; k++) {
      double t = E[c * n + k]; E[c * n + k] = E[piv * n + k]; E[piv * n + k] = t;
      t = inv[c * n + k]; inv[c * n + k] = inv[piv * n + k]; inv[piv * n + k] = t;
    }
    double d = E[c * n + c];
    for (int k = 0; k < n; k++) { E[c * n + k] /= d; inv[c * n + k] /= d; }
    for (int r = 0; r < n; r++) {
      if (r == c) continue;
      double f = E[r * n + c];
      for (int k = 0; k < n; k++) { E[r * n + k] -= f * E[c * n + k]; inv[r * n + k] -= f * inv[c * n + k]; }
    }
  }
}

static void make_mats(int m, int r, dl_wino_mats *t) {
  double E[DL_WINO_AMAX * DL_WINO_AMAX], inv[DL_WINO_AMAX * DL_WINO_AMAX];
  t->m = m; t->r = r; t->a = m + r - 1;
  evaluation(t->a, m, E);
  for (int i = 0; i < t->a * m; i++) t->A[i] = (float)E[i];
  evaluation(t->a, r, E);
  for (int i = 0; i < t->a * r; i++) t->G[i] = (float)E[i];
  evaluation(t->a, t->a, E);
  invert(t->a, E, inv);
  for (int i = 0; i < t->a * t->a; i++) t->B[i] = (float)inv[i];
}

/* ------------------------------------------------------------ the job */

/* Examples are cut into nb blocks of about BLOCK_TILES tiles of at most 6x6 (fewer of 7x7,
 * so that a block holds the same floats), whose V and M stay in the task's L2, and the blocks
 * into nch chunks; a task runs a whole chunk (forward: a whole block) alone: transforms,
 * products, transforms back. The weight gradient's products accumulate per chunk in block
 * order, and the chunk sums are added in chunk order, so the work split depends on the shapes
 * only. */
#define BLOCK_TILES 128
#define BLOCK_XI (BLOCK_TILES * 36)   /* tiles x tile elements of a block */
#define CHUNKS 16
#define PART_FLOATS ((int64_t)8 << 20)    /* bound on the chunk sums, unless 2 chunks exceed it */
_Static_assert((CHUNKS & (CHUNKS - 1)) == 0, "CHUNKS is a power of two");

static int64_t take(dl_wino_job *j) { return atomic_fetch_add(&j->next, 1); }

/* the bias gradient, 16 output channels per item (their rows of one example are contiguous, so
 * the reads stream): each channel's double sum over the examples in order of its row sums */
static void task_bias_grad(void *arg, int t) {
  dl_wino_job *j = arg;
  const dl_wino_geom *g = j->g;
  const int64_t P = g->Ho * g->Wo;
  (void)t;
  for (int64_t b; (b = take(j)) < g->O / DL_WINO_LANES;) {
    double acc[DL_WINO_LANES] = {0};
    for (int64_t n = 0; n < g->N; n++)
      for (int o = 0; o < DL_WINO_LANES; o++)
        acc[o] += dl_conv_row_sum(j->gy + (n * g->O + b * DL_WINO_LANES + o) * P, P);
    for (int o = 0; o < DL_WINO_LANES; o++) j->gb[b * DL_WINO_LANES + o] = (float)acc[o];
  }
}

static void run(dl_ctx *ctx, dl_wino_job *j, void (*fn)(void *, int)) {
  atomic_store(&j->next, 0);
  dl_pool_run(ctx->pool, j->ntask, fn, j);
}

/* ------------------------------------------------------------ the entry points */

/* the job's split for a pool of th threads */
static void split(const dl_wino_geom *g, dl_wino_job *j, int th) {
  memset(j, 0, sizeof *j);
  j->g = g;
  make_mats(tile_m(g), (int)g->k, &j->t);
  j->th = (g->Ho + j->t.m - 1) / j->t.m;
  j->tw = (g->Wo + j->t.m - 1) / j->t.m;
  j->pt = j->th * j->tw;
  j->Hq = j->th * j->t.m + g->k - 1;
  j->Wq = j->tw * j->t.m + g->k - 1;
  j->cb = g->C / DL_WINO_LANES;
  j->ob = g->O / DL_WINO_LANES;
  const int64_t aa = j->t.a * j->t.a, part = aa * g->C * g->O;
  /* a power of two, so that 2, 4, ... threads get equal shares of the chunks (and of the
   * blocks, nch times as many) */
  j->nch = CHUNKS;
  while (j->nch > 2 && (j->nch * part > PART_FLOATS || j->nch > g->N)) j->nch /= 2;
  if (j->nch > g->N) j->nch = g->N;
  const int64_t bt = aa > 36 ? BLOCK_XI / aa : BLOCK_TILES;
  int64_t per = (g->N * j->pt + bt * j->nch - 1) / (bt * j->nch);
  j->nb = j->nch * per < g->N ? j->nch * per : g->N;
  j->emax = j->nb > 0 ? (g->N + j->nb - 1) / j->nb : 0;
  j->task_floats = aa * j->emax * j->pt * (g->C + g->O) + j->Hq * j->Wq * DL_WINO_LANES;
  j->ntask = th < j->nb ? th : (int)j->nb;
  if (j->ntask < 1) j->ntask = 1;
}

static void setup(dl_ctx *ctx, const dl_wino_geom *g, dl_wino_job *j) { split(g, j, dl_pool_threads(ctx->pool)); }

/* ------------------------------------------------------------ which instruction set
 * The kernels run on the set conv_simd chose, except that with DLUA_CONV_SIMD unset (auto) on
 * a CPU that runs both AVX-512 and AVX2, the choice follows a measurement: the two give the
 * same bits, and what differs between them most is the gathers and scatters that move the
 * tiles, which some CPUs run fast and others split into many micro-operations (AVX2 has no
 * scatter and stores lane by lane). One forward of a small layer (4 x 64 x 16 x 16, 64 3x3
 * kernels: the kernel transforms, the gathers, the tile transforms, the products, the
 * scatters) is timed on each set on this thread, best of 3, thread CPU time (about 2 ms in
 * all), and the faster set runs. */
static const dl_wino_tasks *chosen;
static double probe_s[2];          /* seconds of the probe: [0] AVX2, [1] AVX-512; 0 when not timed */
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

/* one run of the probe's layer (dl_cpu_best_seconds' callback) */
typedef struct {
  const dl_wino_tasks *tk;
  dl_wino_job *j;
} probe_run;

static int probe_forward(void *arg) {
  const probe_run *p = arg;
  atomic_store(&p->j->next, 0);
  p->tk->kernel(p->j, 0);
  atomic_store(&p->j->next, 0);
  p->tk->forward(p->j, 0);
  return 1;
}

/* the probe's best time on one set, 0 when its buffers cannot be had */
static double probe(const dl_wino_tasks *tk) {
  const dl_wino_geom g = {4, 64, 16, 16, 64, 3, 1, 1, 16, 16};
  dl_wino_job j;
  split(&g, &j, 1);
  const int64_t aa = j.t.a * j.t.a, nx = g.N * g.C * g.H * g.W, nw = g.O * g.C * 9, no = g.N * g.O * g.Ho * g.Wo;
  float *x = malloc(sizeof(float) * (size_t)nx), *w = malloc(sizeof(float) * (size_t)nw);
  float *out = malloc(sizeof(float) * (size_t)no), *U = malloc(sizeof(float) * (size_t)(aa * g.C * g.O));
  float *S = malloc(sizeof(float) * (size_t)j.task_floats);
  double best = 0;
  if (x && w && out && U && S) {
    for (int64_t i = 0; i < nx; i++) x[i] = (float)(i % 13) * 0.125f - 0.75f;
    for (int64_t i = 0; i < nw; i++) w[i] = (float)(i % 7) * 0.0625f - 0.1875f;
    j.x = x; j.w = w; j.out = out; j.U = U; j.scratch = S;
    probe_run p = {tk, &j};
    best = dl_cpu_best_seconds(probe_forward, &p, 3);
  }
  free(x), free(w), free(out), free(U), free(S);
  return best;
}

static void choose(void) {
  int p = dl_conv_simd();
  chosen = p == DL_CONV_AVX512 ? &dl_wino_tasks_avx512 : &dl_wino_tasks_avx2;
  if (p != DL_CONV_AVX512 || dl_conv_simd_forced() || !dl_conv_simd_runs(DL_CONV_AVX2)) return;
  probe_s[0] = probe(&dl_wino_tasks_avx2);
  probe_s[1] = probe(&dl_wino_tasks_avx512);
  if (probe_s[0] > 0 && probe_s[1] > 0 && probe_s[0] < probe_s[1]) chosen = &dl_wino_tasks_avx2;
}

/* the tasks of the chosen set (dl_wino_enabled: not the portable loops) */
static const dl_wino_tasks *tasks(void) {
  pthread_once(&chosen_once, choose);
  return chosen;
}

const char *dl_wino_path(void) {
  if (!dl_wino_enabled()) return "off";
  return tasks() == &dl_wino_tasks_avx512 ? "avx512" : "avx2";
}

double dl_wino_probe_seconds(const char *path) {
  if (!dl_wino_enabled()) return 0;
  tasks();
  return strcmp(path, "avx2") == 0 ? probe_s[0] : strcmp(path, "avx512") == 0 ? probe_s[1] : 0;
}

/* a float32 scratch tensor of n elements, or NULL with ctx's error set */
static dl_tensor *scratch(dl_ctx *ctx, int64_t n) {
  int64_t sh[1] = {n};
  return dl_tensor_new_empty(ctx, DL_F32, 1, sh);
}

int dl_wino_forward(dl_ctx *ctx, const dl_wino_geom *g, const float *x, const float *w, const float *bias,
                    float *out) {
  if (g->N == 0) return 0;
  dl_wino_job j;
  setup(ctx, g, &j);
  const int64_t aa = j.t.a * j.t.a;
  dl_tensor *U = scratch(ctx, aa * g->C * g->O);
  dl_tensor *S = U ? scratch(ctx, j.ntask * j.task_floats) : NULL;
  if (S) {
    j.x = x; j.w = w; j.bias = bias; j.out = out;
    j.U = U->st->data; j.scratch = S->st->data;
    run(ctx, &j, tasks()->kernel);
    run(ctx, &j, tasks()->forward);
  }
  dl_tensor_release(S); dl_tensor_release(U);
  return S ? 0 : -1;
}

int dl_wino_backward(dl_ctx *ctx, const dl_wino_geom *g, const float *x, const float *w, const float *gy, float *gx,
                     float *gw, float *gb) {
  if (g->N == 0) {
    if (gb) memset(gb, 0, sizeof(float) * (size_t)g->O);
    if (gw) memset(gw, 0, sizeof(float) * (size_t)(g->O * g->C * g->k * g->k));
    return 0;
  }
  dl_wino_job j;
  setup(ctx, g, &j);
  j.x = x; j.w = w; j.gy = gy; j.gx = gx; j.gw = gw; j.gb = gb;
  if (gb) run(ctx, &j, task_bias_grad);
  if (!gx && !gw) return 0;
  const int64_t aa = j.t.a * j.t.a;
  dl_tensor *Ut = NULL, *dU = NULL, *S = NULL;
  int ok = !gx || (Ut = scratch(ctx, aa * g->C * g->O));
  ok = ok && (!gw || (dU = scratch(ctx, j.nch * aa * g->C * g->O)));
  if (ok) S = scratch(ctx, j.ntask * j.task_floats);
  if (S) {
    j.scratch = S->st->data;
    j.dU = dU ? (float *)dU->st->data : NULL;
    if (Ut) { j.Ut = Ut->st->data; run(ctx, &j, tasks()->kernel); }
    run(ctx, &j, tasks()->backward);
    if (gw) run(ctx, &j, tasks()->weight_grad);
  }
  dl_tensor_release(S); dl_tensor_release(dU); dl_tensor_release(Ut);
  return S ? 0 : -1;
}

#else

const char *dl_wino_path(void) { return "off"; }

double dl_wino_probe_seconds(const char *path) {
  (void)path;
  return 0;
}

int dl_wino_forward(dl_ctx *ctx, const dl_wino_geom *g, const float *x, const float *w, const float *bias,
                    float *out) {
  (void)g; (void)x; (void)w; (void)bias; (void)out;
  dl_fail(ctx, "conv2d: the Winograd kernels need an x86-64 build");
  return -1;
}

int dl_wino_backward(dl_ctx *ctx, const dl_wino_geom *g, const float *x, const float *w, const float *gy, float *gx,
                     float *gw, float *gb) {
  (void)g; (void)x; (void)w; (void)gy; (void)gx; (void)gw; (void)gb;
  dl_fail(ctx, "conv2d: the Winograd kernels need an x86-64 build");
  return -1;
}

#endif

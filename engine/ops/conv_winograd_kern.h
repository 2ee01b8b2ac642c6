/* conv_winograd_kern.h -- the vector work of conv_winograd.c, written once on simd16.h's
 * 16-lane vectors and compiled per instruction set by conv_winograd_avx512.c and
 * conv_winograd_avx2.c (each defines nothing else): the tile transforms, the walks that
 * pack, gather and scatter the tiles, and the pool tasks around the products. Each lane is
 * one channel and every operation is the same float operation on any set, so the two give
 * the same bits; the products are dl_sgemm_serial's, whose paths agree too. */
/* See LICENSE */
#include "ops/conv_winograd.h"
#include "ops/ops.h"
#include "ops/simd16.h"

#include <string.h>

/* ------------------------------------------------------------ the transforms */


/* The points come as 0 (when a is even: z = 1), then pairs +p, -p, then infinity, and the
 * matrices inherit that:
 *  - a row of G or A at -p is the row at +p with its odd columns negated (it evaluates
 *    the same powers at -p); the rows at 0 and infinity are e_0 and e_last;
 *  - B = E^-1 has the same symmetry in its columns, B[x][-p] = (-1)^x B[x][+p], because
 *    E J = P E (J negates odd powers, P swaps each pair of points, and negates infinity's
 *    row when a is even); so its column at 0 is zero on odd x, its column at infinity zero
 *    on the rows x of the other parity than a - 1, and its last row is e_last (a column at a
 *    finite point holds the Lagrange polynomial of degree a - 2 that is 1 there and 0 at the
 *    others). With 0 a point, the pair columns vanish on the first row (their polynomials
 *    vanish at 0), and the first row is e_0.
 * So each 1-D map needs about half the products of a dense one: where +p and -p are outputs
 * (G, A, B^T), the even and odd halves of the sum give both as e + o and e - o; where they
 * are inputs (A^T, G^T, B), their sum and difference feed every output. A 2-D transform
 * L X R applies one such 1-D map to the rows of X, then to the columns of the result. Each
 * sum runs in a fixed order, the first term a product, so results do not depend on anything
 * but the shapes. Vectors are indexed with strides: v[i * s]. */
#define V1(x) v16_set1(x)

/* out[k] = sum_x T[k][x] in[x], T [a, n] row-major with rows at the points (G, A) */
V16_INLINE void eval_out(int a, int n, const float *T, const v16 *in, int is, v16 *out, int os) {
  const int z = a % 2 == 0;                         /* a row at 0 */
  if (z) out[0] = in[0];
  for (int k = z; k < a - 1; k += 2) {
    v16 e = in[0], o = v16_mul(in[is], V1(T[k * n + 1]));
    for (int x = 2; x < n; x += 2) e = v16_fma(in[x * is], V1(T[k * n + x]), e);
    for (int x = 3; x < n; x += 2) o = v16_fma(in[x * is], V1(T[k * n + x]), o);
    out[k * os] = v16_add(e, o);
    out[(k + 1) * os] = v16_sub(e, o);
  }
  out[(a - 1) * os] = in[(n - 1) * is];
}

/* out[i] = sum_p T[p][i] in[p] for i < n: the transpose of eval_out's map (A^T, G^T) */
V16_INLINE void eval_in(int a, int n, const float *T, const v16 *in, int is, v16 *out, int os) {
  const int z = a % 2 == 0;
  v16 s[DL_WINO_AMAX / 2], d[DL_WINO_AMAX / 2];
  for (int k = z; k < a - 1; k += 2) {
    s[k / 2] = v16_add(in[k * is], in[(k + 1) * is]);
    d[k / 2] = v16_sub(in[k * is], in[(k + 1) * is]);
  }
  v16 acc = z ? v16_add(in[0], s[0]) : s[0];   /* T[p][0] = 1 at every finite point */
  for (int k = 2 + z; k < a - 1; k += 2) acc = v16_add(acc, s[k / 2]);
  out[0] = acc;
  for (int i = 1; i < n; i++) {
    const v16 *h = i % 2 ? d : s;
    acc = v16_mul(h[0], V1(T[z * n + i]));
    for (int k = 2 + z; k < a - 1; k += 2) acc = v16_fma(h[k / 2], V1(T[k * n + i]), acc);
    if (i == n - 1) acc = v16_add(acc, in[(a - 1) * is]);
    out[i * os] = acc;
  }
}

/* out[k] = sum_x B[x][k] in[x]: B^T, B [a, a] row-major */
V16_INLINE void interp_out(int a, const float *B, const v16 *in, int is, v16 *out, int os) {
  const int z = a % 2 == 0, l = (a - 1) % 2;        /* l: the parity of the infinity column's rows */
  if (z) {                                          /* the column at 0: even rows, B[0][0] = 1 */
    v16 acc = in[0];
    for (int x = 2; x < a - 1; x += 2) acc = v16_fma(in[x * is], V1(B[x * a]), acc);
    out[0] = acc;
  }
  for (int k = z; k < a - 1; k += 2) {              /* row 0 is zero here when 0 is a point */
    v16 e = v16_mul(in[2 * z * is], V1(B[2 * z * a + k])), o = v16_mul(in[is], V1(B[a + k]));
    for (int x = 2 * z + 2; x < a - 1; x += 2) e = v16_fma(in[x * is], V1(B[x * a + k]), e);
    for (int x = 3; x < a - 1; x += 2) o = v16_fma(in[x * is], V1(B[x * a + k]), o);
    out[k * os] = v16_add(e, o);
    out[(k + 1) * os] = v16_sub(e, o);
  }
  v16 acc = v16_mul(in[l * is], V1(B[l * a + a - 1]));
  for (int x = l + 2; x < a - 1; x += 2) acc = v16_fma(in[x * is], V1(B[x * a + a - 1]), acc);
  out[(a - 1) * os] = v16_add(acc, in[(a - 1) * is]);   /* B[a-1][a-1] = 1 */
}

/* out[x] = sum_k B[x][k] in[k]: B itself */
V16_INLINE void interp_in(int a, const float *B, const v16 *in, int is, v16 *out, int os) {
  const int z = a % 2 == 0, l = (a - 1) % 2;
  v16 s[DL_WINO_AMAX / 2], d[DL_WINO_AMAX / 2];
  for (int k = z; k < a - 1; k += 2) {
    s[k / 2] = v16_add(in[k * is], in[(k + 1) * is]);
    d[k / 2] = v16_sub(in[k * is], in[(k + 1) * is]);
  }
  if (z) out[0] = in[0];
  for (int x = z; x < a - 1; x++) {
    const v16 *h = x % 2 ? d : s;
    v16 acc = v16_mul(h[0], V1(B[x * a + z]));
    for (int k = z + 2; k < a - 1; k += 2) acc = v16_fma(h[k / 2], V1(B[x * a + k]), acc);
    if (x % 2 == l) acc = v16_fma(in[(a - 1) * is], V1(B[x * a + a - 1]), acc);
    else if (z) acc = v16_fma(in[0], V1(B[x * a]), acc);
    out[x * os] = acc;
  }
  out[(a - 1) * os] = in[(a - 1) * is];
}

/* The six transforms, each spelled out per tile size so its loops have constant bounds and
 * unroll: V = B^T d B; Y = A^T M A; dM = A dY A^T; dd = B dV B^T; U = G w G^T and
 * dw = G^T dU G (row-major: A [a, m], G [a, r], B [a, a]). Rows first, then columns. The
 * six bodies are alike in shape on purpose: each is a transform or its adjoint, two passes
 * with a fixed matrix and constant bounds, which a shared loop would lose. */
#define SHAPES(X) X(4, 2, 3) X(6, 4, 3) X(6, 2, 5) X(7, 3, 5)

#define TRANSFORMS(a, m, r)                                                                                          \
  static void in_##a##m##r(const dl_wino_mats *t, const v16 *d, v16 *v) {                                            \
    v16 h[a * a];                                                                                                    \
    for (int y = 0; y < a; y++) interp_out(a, t->B, d + y * a, 1, h + y * a, 1);                                     \
    for (int x = 0; x < a; x++) interp_out(a, t->B, h + x, a, v + x, a);                                             \
  }                                                                                                                  \
  static void out_##a##m##r(const dl_wino_mats *t, const v16 *mm, v16 *y) {                                          \
    v16 h[a * m];                                                                                                    \
    for (int p = 0; p < a; p++) eval_in(a, m, t->A, mm + p * a, 1, h + p * m, 1);                                    \
    for (int j = 0; j < m; j++) eval_in(a, m, t->A, h + j, m, y + j, m);                                             \
  }                                                                                                                  \
  static void dout_##a##m##r(const dl_wino_mats *t, const v16 *dy, v16 *dm) {                                        \
    v16 h[m * a];                                                                                                    \
    for (int i = 0; i < m; i++) eval_out(a, m, t->A, dy + i * m, 1, h + i * a, 1);                                   \
    for (int p = 0; p < a; p++) eval_out(a, m, t->A, h + p, a, dm + p, a);                                           \
  }                                                                                                                  \
  static void din_##a##m##r(const dl_wino_mats *t, const v16 *dv, v16 *dd) {                                         \
    v16 h[a * a];                                                                                                    \
    for (int y = 0; y < a; y++) interp_in(a, t->B, dv + y * a, 1, h + y * a, 1);                                     \
    for (int x = 0; x < a; x++) interp_in(a, t->B, h + x, a, dd + x, a);                                             \
  }                                                                                                                  \
  static void ker_##a##m##r(const dl_wino_mats *t, const v16 *w, v16 *u) {                                           \
    v16 h[r * a];                                                                                                    \
    for (int i = 0; i < r; i++) eval_out(a, r, t->G, w + i * r, 1, h + i * a, 1);                                    \
    for (int p = 0; p < a; p++) eval_out(a, r, t->G, h + p, a, u + p, a);                                            \
  }                                                                                                                  \
  static void dker_##a##m##r(const dl_wino_mats *t, const v16 *du, v16 *dw) {                                        \
    v16 h[a * r];                                                                                                    \
    for (int p = 0; p < a; p++) eval_in(a, r, t->G, du + p * a, 1, h + p * r, 1);                                    \
    for (int j = 0; j < r; j++) eval_in(a, r, t->G, h + j, r, dw + j, r);                                            \
  }
SHAPES(TRANSFORMS)
#undef V1

typedef void (*xform)(const dl_wino_mats *, const v16 *, v16 *);
typedef struct {
  xform in, out, dout, din, ker, dker;
} xforms;

static xforms pick(const dl_wino_mats *t) {
#define PICK(A_, M_, R_)                                                                                             \
  if (t->a == A_ && t->m == M_ && t->r == R_)                                                                        \
    return (xforms){in_##A_##M_##R_, out_##A_##M_##R_, dout_##A_##M_##R_, din_##A_##M_##R_, ker_##A_##M_##R_,        \
                    dker_##A_##M_##R_};
  SHAPES(PICK)
#undef PICK
  return (xforms){0};
}

typedef struct {
  int64_t n0, e, T;            /* examples n0 .. n0 + e - 1, T = e * pt tiles */
  float *V, *M, *plane;        /* [aa, T, C], [aa, T, O], [Hq, Wq, 16] */
} blk;

static int64_t take(dl_wino_job *j) { return atomic_fetch_add(&j->next, 1); }

static blk block(const dl_wino_job *j, int64_t k, int t) {
  const int64_t aa = j->t.a * j->t.a, bt = j->emax * j->pt, N = j->g->N;
  float *s = j->scratch + t * j->task_floats;
  blk b = {N * k / j->nb, N * (k + 1) / j->nb - N * k / j->nb, 0, s, s + aa * bt * j->g->C,
           s + aa * bt * (j->g->C + j->g->O)};
  b.T = b.e * j->pt;
  return b;
}

/* b's plane for example n0 + nl, channel block c: the padded input, zeros around */
static void pack(const dl_wino_job *j, const blk *b, int64_t nl, int64_t c) {
  const dl_wino_geom *g = j->g;
  const int64_t H = g->H, W = g->W, Wq = j->Wq;
  const float *src = j->x + ((b->n0 + nl) * g->C + c * DL_WINO_LANES) * H * W;
  v16_ix idx = v16_offsets(H * W);
  memset(b->plane, 0, sizeof(float) * (size_t)(j->Hq * Wq * DL_WINO_LANES));
  for (int64_t h = 0; h < H; h++)
    for (int64_t w = 0; w < W; w++)
      v16_store(b->plane + ((h + g->ph) * Wq + w + g->pw) * DL_WINO_LANES,
                       v16_gather(src + h * W + w, idx));
}

/* The four tile walks below (input_tiles, output_tiles, grad_tiles, input_grad) share the
 * (ty, tx) loop on purpose: each direction has its own vector loads and stores (contiguous,
 * gathered, scattered, accumulated) inline in the loop, which a shared walk would hide
 * behind a call per tile. */
/* V [xi, t, c block] for the tiles of example n0 + nl from its packed plane */
static void input_tiles(const dl_wino_job *j, const blk *b, int64_t nl, int64_t c) {
  const xforms f = pick(&j->t);
  const int a = j->t.a, m = j->t.m, aa = a * a;
  const int64_t C = j->g->C;
  v16 d[DL_WINO_AMAX * DL_WINO_AMAX], v[DL_WINO_AMAX * DL_WINO_AMAX];
  for (int64_t ty = 0; ty < j->th; ty++)
    for (int64_t tx = 0; tx < j->tw; tx++) {
      const float *p = b->plane + (ty * m * j->Wq + tx * m) * DL_WINO_LANES;
      for (int y = 0; y < a; y++)
        for (int x = 0; x < a; x++) d[y * a + x] = v16_load(p + (y * j->Wq + x) * DL_WINO_LANES);
      f.in(&j->t, d, v);
      float *dst = b->V + (nl * j->pt + ty * j->tw + tx) * C + c * DL_WINO_LANES;
      for (int xi = 0; xi < aa; xi++) v16_store(dst + xi * b->T * C, v[xi]);
    }
}

/* Y from M for example n0 + nl and output block o, + bias, scattered into out's NCHW planes */
static void output_tiles(const dl_wino_job *j, const blk *b, int64_t nl, int64_t o) {
  const xforms f = pick(&j->t);
  const dl_wino_geom *g = j->g;
  const int a = j->t.a, m = j->t.m, aa = a * a;
  const int64_t O = g->O, Ho = g->Ho, Wo = g->Wo;
  v16_ix idx = v16_offsets(Ho * Wo);
  v16 bias = j->bias ? v16_load(j->bias + o * DL_WINO_LANES) : v16_zero();
  float *dst = j->out + ((b->n0 + nl) * O + o * DL_WINO_LANES) * Ho * Wo;
  v16 mv[DL_WINO_AMAX * DL_WINO_AMAX], y[DL_WINO_AMAX * DL_WINO_AMAX];
  for (int64_t ty = 0; ty < j->th; ty++)
    for (int64_t tx = 0; tx < j->tw; tx++) {
      const float *src = b->M + (nl * j->pt + ty * j->tw + tx) * O + o * DL_WINO_LANES;
      for (int xi = 0; xi < aa; xi++) mv[xi] = v16_load(src + xi * b->T * O);
      f.out(&j->t, mv, y);
      for (int i = 0; i < m && ty * m + i < Ho; i++)
        for (int q = 0; q < m && tx * m + q < Wo; q++)
          v16_scatter(dst + (ty * m + i) * Wo + tx * m + q, idx, v16_add(y[i * m + q], bias));
    }
}

/* dM [xi, t, o block] = A dY A^T for the tiles of example n0 + nl; positions past the output are 0 */
static void grad_tiles(const dl_wino_job *j, const blk *b, int64_t nl, int64_t o) {
  const xforms f = pick(&j->t);
  const dl_wino_geom *g = j->g;
  const int a = j->t.a, m = j->t.m, aa = a * a;
  const int64_t O = g->O, Ho = g->Ho, Wo = g->Wo;
  v16_ix idx = v16_offsets(Ho * Wo);
  const float *src = j->gy + ((b->n0 + nl) * O + o * DL_WINO_LANES) * Ho * Wo;
  v16 dy[DL_WINO_AMAX * DL_WINO_AMAX], dm[DL_WINO_AMAX * DL_WINO_AMAX];
  for (int64_t ty = 0; ty < j->th; ty++)
    for (int64_t tx = 0; tx < j->tw; tx++) {
      for (int i = 0; i < m; i++)
        for (int q = 0; q < m; q++)
          dy[i * m + q] = ty * m + i < Ho && tx * m + q < Wo
                              ? v16_gather(src + (ty * m + i) * Wo + tx * m + q, idx)
                              : v16_zero();
      f.dout(&j->t, dy, dm);
      float *dst = b->M + (nl * j->pt + ty * j->tw + tx) * O + o * DL_WINO_LANES;
      for (int xi = 0; xi < aa; xi++) v16_store(dst + xi * b->T * O, dm[xi]);
    }
}

/* dx of example n0 + nl, channel block c: B dV B^T of each tile added into the plane, whose
 * interior goes to gx's NCHW planes */
static void input_grad(const dl_wino_job *j, const blk *b, int64_t nl, int64_t c) {
  const xforms f = pick(&j->t);
  const dl_wino_geom *g = j->g;
  const int a = j->t.a, m = j->t.m, aa = a * a;
  const int64_t C = g->C, H = g->H, W = g->W, Wq = j->Wq;
  memset(b->plane, 0, sizeof(float) * (size_t)(j->Hq * Wq * DL_WINO_LANES));
  v16 dv[DL_WINO_AMAX * DL_WINO_AMAX], dd[DL_WINO_AMAX * DL_WINO_AMAX];
  for (int64_t ty = 0; ty < j->th; ty++)
    for (int64_t tx = 0; tx < j->tw; tx++) {
      const float *src = b->V + (nl * j->pt + ty * j->tw + tx) * C + c * DL_WINO_LANES;
      for (int xi = 0; xi < aa; xi++) dv[xi] = v16_load(src + xi * b->T * C);
      f.din(&j->t, dv, dd);
      float *p = b->plane + (ty * m * Wq + tx * m) * DL_WINO_LANES;
      for (int y = 0; y < a; y++)
        for (int x = 0; x < a; x++) {
          float *q = p + (y * Wq + x) * DL_WINO_LANES;
          v16_store(q, v16_add(v16_load(q), dd[y * a + x]));
        }
    }
  v16_ix idx = v16_offsets(H * W);
  float *dst = j->gx + ((b->n0 + nl) * C + c * DL_WINO_LANES) * H * W;
  for (int64_t h = 0; h < H; h++)
    for (int64_t w = 0; w < W; w++)
      v16_scatter(dst + h * W + w, idx, v16_load(b->plane + ((h + g->ph) * Wq + w + g->pw) * DL_WINO_LANES));
}

/* U [xi, c, o] (lanes over o) or, with transposed, Ut [xi, o, c] (lanes over c) from w [O, C, r, r] */
static void kernel_rows(const dl_wino_job *j, int64_t i, int transposed) {
  const xforms f = pick(&j->t);
  const dl_wino_geom *g = j->g;
  const int a = j->t.a, r = j->t.r, aa = a * a, rr = r * r;
  const int64_t C = g->C, O = g->O;
  /* row i: input channel c (U) or output channel o (Ut); its 16-lane blocks run over the other */
  int64_t blocks = transposed ? C / DL_WINO_LANES : O / DL_WINO_LANES, len = transposed ? C : O;
  v16_ix idx = v16_offsets(transposed ? rr : C * rr);
  float *dst = (transposed ? j->Ut : j->U) + i * len;
  v16 wv[DL_WINO_AMAX * DL_WINO_AMAX], u[DL_WINO_AMAX * DL_WINO_AMAX];
  for (int64_t b = 0; b < blocks; b++) {
    const float *src = transposed ? j->w + (i * C + b * DL_WINO_LANES) * rr : j->w + (b * DL_WINO_LANES * C + i) * rr;
    for (int k = 0; k < rr; k++) wv[k] = v16_gather(src + k, idx);
    f.ker(&j->t, wv, u);
    for (int xi = 0; xi < aa; xi++) v16_store(dst + xi * C * O + b * DL_WINO_LANES, u[xi]);
  }
}

/* gw [o block, c, r, r] = G^T dU G for input channel c, dU the chunk sums added in chunk order */
static void weight_grad_row(const dl_wino_job *j, int64_t c) {
  const xforms f = pick(&j->t);
  const dl_wino_geom *g = j->g;
  const int a = j->t.a, r = j->t.r, aa = a * a, rr = r * r;
  const int64_t C = g->C, O = g->O;
  v16_ix idx = v16_offsets(C * rr);
  v16 du[DL_WINO_AMAX * DL_WINO_AMAX], dw[DL_WINO_AMAX * DL_WINO_AMAX];
  for (int64_t b = 0; b < O / DL_WINO_LANES; b++) {
    for (int xi = 0; xi < aa; xi++) {
      const float *p = j->dU + (xi * C + c) * O + b * DL_WINO_LANES;
      du[xi] = v16_load(p);
      for (int64_t k = 1; k < j->nch; k++) du[xi] = v16_add(du[xi], v16_load(p + k * aa * C * O));
    }
    f.dker(&j->t, du, dw);
    float *dst = j->gw + (b * DL_WINO_LANES * C + c) * rr;
    for (int k = 0; k < rr; k++) v16_scatter(dst + k, idx, dw[k]);
  }
}

/* ------------------------------------------------------------ the pool tasks */

static void task_kernel(void *arg, int t) {      /* U, or Ut when U is not wanted */
  dl_wino_job *j = arg;
  int transposed = j->U == NULL;
  int64_t rows = transposed ? j->g->O : j->g->C;
  (void)t;
  for (int64_t i; (i = take(j)) < rows;) kernel_rows(j, i, transposed);
}

static void task_forward(void *arg, int t) {
  dl_wino_job *j = arg;
  const int64_t C = j->g->C, O = j->g->O;
  for (int64_t k; (k = take(j)) < j->nb;) {
    blk b = block(j, k, t);
    for (int64_t i = 0; i < b.e * j->cb; i++) {
      pack(j, &b, i / j->cb, i % j->cb);
      input_tiles(j, &b, i / j->cb, i % j->cb);
    }
    for (int xi = 0; xi < j->t.a * j->t.a; xi++)
      dl_sgemm_serial(0, 0, b.T, O, C, 1.0f, b.V + xi * b.T * C, C, j->U + xi * C * O, O, 0.0f, b.M + xi * b.T * O, O);
    for (int64_t i = 0; i < b.e * j->ob; i++) output_tiles(j, &b, i / j->ob, i % j->ob);
  }
}

static void task_backward(void *arg, int t) {
  dl_wino_job *j = arg;
  const int64_t C = j->g->C, O = j->g->O, aa = j->t.a * j->t.a;
  for (int64_t c; (c = take(j)) < j->nch;) {
    int64_t k0 = j->nb * c / j->nch, k1 = j->nb * (c + 1) / j->nch;
    for (int64_t k = k0; k < k1; k++) {
      blk b = block(j, k, t);
      if (j->gw)                                 /* V, for dU */
        for (int64_t i = 0; i < b.e * j->cb; i++) {
          pack(j, &b, i / j->cb, i % j->cb);
          input_tiles(j, &b, i / j->cb, i % j->cb);
        }
      for (int64_t i = 0; i < b.e * j->ob; i++) grad_tiles(j, &b, i / j->ob, i % j->ob);
      for (int64_t xi = 0; xi < aa; xi++) {
        float *v = b.V + xi * b.T * C, *dm = b.M + xi * b.T * O;
        if (j->gw)           /* dU_xi += V_xi^T dM_xi, in the chunk's sums */
          dl_sgemm_serial(1, 0, C, O, b.T, 1.0f, v, C, dm, O, k == k0 ? 0.0f : 1.0f, j->dU + (c * aa + xi) * C * O, O);
        if (j->gx)           /* dV_xi = dM_xi U_xi^T, over V_xi once it is used */
          dl_sgemm_serial(0, 0, b.T, C, O, 1.0f, dm, O, j->Ut + xi * O * C, C, 0.0f, v, C);
      }
      if (j->gx)
        for (int64_t i = 0; i < b.e * j->cb; i++) input_grad(j, &b, i / j->cb, i % j->cb);
    }
  }
}

static void task_weight_grad(void *arg, int t) {
  dl_wino_job *j = arg;
  (void)t;
  for (int64_t c; (c = take(j)) < j->g->C;) weight_grad_row(j, c);
}

/* the bias gradient, 16 output channels per item (their rows of one example are contiguous, so
 * the reads stream): each channel's double sum over the examples in order of its row sums */

const dl_wino_tasks V16_NAME(dl_wino_tasks) = {task_kernel, task_forward, task_backward, task_weight_grad};

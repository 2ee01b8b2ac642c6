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
 */
/* See LICENSE */
#include "ops/conv_winograd.h"

#include "ops/conv_simd.h"
#include "ops/ops.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define WA 7                      /* the largest tile a */
#define LANES 16
#define MAX_EXAMPLE_FLOATS ((int64_t)64 << 20)

static int wino_off;
static pthread_once_t wino_once = PTHREAD_ONCE_INIT;

static void wino_probe(void) {
  const char *s = getenv("DLUA_CONV_WINOGRAD");
  wino_off = s && strcmp(s, "0") == 0;
}

int dl_wino_enabled(void) {
  pthread_once(&wino_once, wino_probe);
  return DL_AVX512_BUILD && !wino_off && dl_conv_simd();
}

int dl_wino_fits(const dl_wino_geom *g) {
  if (!dl_wino_enabled()) return 0;
  if (g->k != 3 && g->k != 5) return 0;
  if (g->C % LANES || g->O % LANES || g->C < LANES || g->O < LANES) return 0;
  /* gathers and scatters index a channel block's planes with 32-bit offsets */
  if (g->H * g->W > INT32_MAX / LANES || g->Ho * g->Wo > INT32_MAX / LANES) return 0;
  /* a block holds at least one example's V and M: 36 floats per 4 outputs and channel at
   * most; huge images stay with im2col, whose buffers grow with the kernel instead */
  int64_t per_channel = (g->Ho / 2 + 1) * (g->Wo / 2 + 1) * 36;     /* < 2^33: Ho, Wo < 2^27 */
  return g->C <= MAX_EXAMPLE_FLOATS / per_channel && g->O <= MAX_EXAMPLE_FLOATS / per_channel &&
         g->C + g->O <= MAX_EXAMPLE_FLOATS / per_channel;
}

#if DL_AVX512_BUILD

/* the output tile: F(4x4, 3x3) and F(3x3, 5x5); F(2x2, r x r) when the output is small */
static int tile_m(const dl_wino_geom *g) {
  if (g->Ho < 8 || g->Wo < 8) return 2;
  return g->k == 5 ? 3 : 4;
}

/* ------------------------------------------------------------ the matrices */

typedef struct {
  int m, r, a;
  float A[WA * WA];     /* [a, m]: A[p][i] = point_p ^ i, the infinity row picks i = m - 1 */
  float G[WA * WA];     /* [a, r], the same for the kernel */
  float B[WA * WA];     /* [a, a]: the inverse of the a x a evaluation matrix */
} mats;

/* The finite points of an a-point tile: 0 and pairs +-p when a is even, pairs only when it is
 * odd. 6 points (F(4x4, 3x3), F(2x2, 5x5)) use 3/4 and 3/2 rather than 1 and 2: the float32
 * error of the whole convolution against a float64 reference drops 5x for F(4x4, 3x3) and 3x
 * for F(2x2, 5x5), to 2-3x the im2col path's. F(3x3, 5x5)'s 7 points +-5/16, +-7/8, +-7/4 give
 * 4.5x im2col's error, where F(4x4, 5x5) on 8 (0, +-1/2, +-1, +-2; no other symmetric set of
 * dyadic points cut that by more than 15%) gave 12x. Measured over grids of dyadic pairs
 * (steps of 1/32 near the optimum); every power of these points up to the 4th, all G needs,
 * is exact in float32. */
static const double *points(int a) {
  static const double p4[WA - 1] = {0, 1, -1};
  static const double p6[WA - 1] = {0, 0.75, -0.75, 1.5, -1.5};
  static const double p7[WA - 1] = {0.3125, -0.3125, 0.875, -0.875, 1.75, -1.75};
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

static void make_mats(int m, int r, mats *t) {
  double E[WA * WA], inv[WA * WA];
  t->m = m; t->r = r; t->a = m + r - 1;
  evaluation(t->a, m, E);
  for (int i = 0; i < t->a * m; i++) t->A[i] = (float)E[i];
  evaluation(t->a, r, E);
  for (int i = 0; i < t->a * r; i++) t->G[i] = (float)E[i];
  evaluation(t->a, t->a, E);
  invert(t->a, E, inv);
  for (int i = 0; i < t->a * t->a; i++) t->B[i] = (float)inv[i];
}

/* ------------------------------------------------------------ the transforms */

#define TARGET DL_AVX512_TARGET
#define INLINE DL_AVX512_INLINE

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
#define V1(x) _mm512_set1_ps(x)

/* out[k] = sum_x T[k][x] in[x], T [a, n] row-major with rows at the points (G, A) */
TARGET INLINE void eval_out(int a, int n, const float *T, const __m512 *in, int is, __m512 *out, int os) {
  const int z = a % 2 == 0;                         /* a row at 0 */
  if (z) out[0] = in[0];
  for (int k = z; k < a - 1; k += 2) {
    __m512 e = in[0], o = _mm512_mul_ps(in[is], V1(T[k * n + 1]));
    for (int x = 2; x < n; x += 2) e = _mm512_fmadd_ps(in[x * is], V1(T[k * n + x]), e);
    for (int x = 3; x < n; x += 2) o = _mm512_fmadd_ps(in[x * is], V1(T[k * n + x]), o);
    out[k * os] = _mm512_add_ps(e, o);
    out[(k + 1) * os] = _mm512_sub_ps(e, o);
  }
  out[(a - 1) * os] = in[(n - 1) * is];
}

/* out[i] = sum_p T[p][i] in[p] for i < n: the transpose of eval_out's map (A^T, G^T) */
TARGET INLINE void eval_in(int a, int n, const float *T, const __m512 *in, int is, __m512 *out, int os) {
  const int z = a % 2 == 0;
  __m512 s[WA / 2], d[WA / 2];
  for (int k = z; k < a - 1; k += 2) {
    s[k / 2] = _mm512_add_ps(in[k * is], in[(k + 1) * is]);
    d[k / 2] = _mm512_sub_ps(in[k * is], in[(k + 1) * is]);
  }
  __m512 acc = z ? _mm512_add_ps(in[0], s[0]) : s[0];   /* T[p][0] = 1 at every finite point */
  for (int k = 2 + z; k < a - 1; k += 2) acc = _mm512_add_ps(acc, s[k / 2]);
  out[0] = acc;
  for (int i = 1; i < n; i++) {
    const __m512 *h = i % 2 ? d : s;
    acc = _mm512_mul_ps(h[0], V1(T[z * n + i]));
    for (int k = 2 + z; k < a - 1; k += 2) acc = _mm512_fmadd_ps(h[k / 2], V1(T[k * n + i]), acc);
    if (i == n - 1) acc = _mm512_add_ps(acc, in[(a - 1) * is]);
    out[i * os] = acc;
  }
}

/* out[k] = sum_x B[x][k] in[x]: B^T, B [a, a] row-major */
TARGET INLINE void interp_out(int a, const float *B, const __m512 *in, int is, __m512 *out, int os) {
  const int z = a % 2 == 0, l = (a - 1) % 2;        /* l: the parity of the infinity column's rows */
  if (z) {                                          /* the column at 0: even rows, B[0][0] = 1 */
    __m512 acc = in[0];
    for (int x = 2; x < a - 1; x += 2) acc = _mm512_fmadd_ps(in[x * is], V1(B[x * a]), acc);
    out[0] = acc;
  }
  for (int k = z; k < a - 1; k += 2) {              /* row 0 is zero here when 0 is a point */
    __m512 e = _mm512_mul_ps(in[2 * z * is], V1(B[2 * z * a + k])), o = _mm512_mul_ps(in[is], V1(B[a + k]));
    for (int x = 2 * z + 2; x < a - 1; x += 2) e = _mm512_fmadd_ps(in[x * is], V1(B[x * a + k]), e);
    for (int x = 3; x < a - 1; x += 2) o = _mm512_fmadd_ps(in[x * is], V1(B[x * a + k]), o);
    out[k * os] = _mm512_add_ps(e, o);
    out[(k + 1) * os] = _mm512_sub_ps(e, o);
  }
  __m512 acc = _mm512_mul_ps(in[l * is], V1(B[l * a + a - 1]));
  for (int x = l + 2; x < a - 1; x += 2) acc = _mm512_fmadd_ps(in[x * is], V1(B[x * a + a - 1]), acc);
  out[(a - 1) * os] = _mm512_add_ps(acc, in[(a - 1) * is]);   /* B[a-1][a-1] = 1 */
}

/* out[x] = sum_k B[x][k] in[k]: B itself */
TARGET INLINE void interp_in(int a, const float *B, const __m512 *in, int is, __m512 *out, int os) {
  const int z = a % 2 == 0, l = (a - 1) % 2;
  __m512 s[WA / 2], d[WA / 2];
  for (int k = z; k < a - 1; k += 2) {
    s[k / 2] = _mm512_add_ps(in[k * is], in[(k + 1) * is]);
    d[k / 2] = _mm512_sub_ps(in[k * is], in[(k + 1) * is]);
  }
  if (z) out[0] = in[0];
  for (int x = z; x < a - 1; x++) {
    const __m512 *h = x % 2 ? d : s;
    __m512 acc = _mm512_mul_ps(h[0], V1(B[x * a + z]));
    for (int k = z + 2; k < a - 1; k += 2) acc = _mm512_fmadd_ps(h[k / 2], V1(B[x * a + k]), acc);
    if (x % 2 == l) acc = _mm512_fmadd_ps(in[(a - 1) * is], V1(B[x * a + a - 1]), acc);
    else if (z) acc = _mm512_fmadd_ps(in[0], V1(B[x * a]), acc);
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

#define TRANSFORMS(a, m, r)                                                                                     \
  TARGET static void in_##a##m##r(const mats *t, const __m512 *d, __m512 *v) {                                   \
    __m512 h[a * a];                                                                                             \
    for (int y = 0; y < a; y++) interp_out(a, t->B, d + y * a, 1, h + y * a, 1);                                 \
    for (int x = 0; x < a; x++) interp_out(a, t->B, h + x, a, v + x, a);                                         \
  }                                                                                                              \
  TARGET static void out_##a##m##r(const mats *t, const __m512 *mm, __m512 *y) {                                 \
    __m512 h[a * m];                                                                                             \
    for (int p = 0; p < a; p++) eval_in(a, m, t->A, mm + p * a, 1, h + p * m, 1);                                \
    for (int j = 0; j < m; j++) eval_in(a, m, t->A, h + j, m, y + j, m);                                         \
  }                                                                                                              \
  TARGET static void dout_##a##m##r(const mats *t, const __m512 *dy, __m512 *dm) {                               \
    __m512 h[m * a];                                                                                             \
    for (int i = 0; i < m; i++) eval_out(a, m, t->A, dy + i * m, 1, h + i * a, 1);                               \
    for (int p = 0; p < a; p++) eval_out(a, m, t->A, h + p, a, dm + p, a);                                       \
  }                                                                                                              \
  TARGET static void din_##a##m##r(const mats *t, const __m512 *dv, __m512 *dd) {                                \
    __m512 h[a * a];                                                                                             \
    for (int y = 0; y < a; y++) interp_in(a, t->B, dv + y * a, 1, h + y * a, 1);                                 \
    for (int x = 0; x < a; x++) interp_in(a, t->B, h + x, a, dd + x, a);                                         \
  }                                                                                                              \
  TARGET static void ker_##a##m##r(const mats *t, const __m512 *w, __m512 *u) {                                  \
    __m512 h[r * a];                                                                                             \
    for (int i = 0; i < r; i++) eval_out(a, r, t->G, w + i * r, 1, h + i * a, 1);                                \
    for (int p = 0; p < a; p++) eval_out(a, r, t->G, h + p, a, u + p, a);                                        \
  }                                                                                                              \
  TARGET static void dker_##a##m##r(const mats *t, const __m512 *du, __m512 *dw) {                               \
    __m512 h[a * r];                                                                                             \
    for (int p = 0; p < a; p++) eval_in(a, r, t->G, du + p * a, 1, h + p * r, 1);                                \
    for (int j = 0; j < r; j++) eval_in(a, r, t->G, h + j, r, dw + j, r);                                        \
  }
SHAPES(TRANSFORMS)
#undef V1

typedef void (*xform)(const mats *, const __m512 *, __m512 *);
typedef struct {
  xform in, out, dout, din, ker, dker;
} xforms;

static xforms pick(const mats *t) {
#define PICK(A_, M_, R_)                                                                                       \
  if (t->a == A_ && t->m == M_ && t->r == R_)                                                                  \
    return (xforms){in_##A_##M_##R_, out_##A_##M_##R_, dout_##A_##M_##R_, din_##A_##M_##R_, ker_##A_##M_##R_,   \
                    dker_##A_##M_##R_};
  SHAPES(PICK)
#undef PICK
  return (xforms){0};
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

typedef struct {
  const dl_wino_geom *g;
  mats t;
  xforms f;
  int64_t th, tw, pt;          /* tiles down, across, per example */
  int64_t Hq, Wq;              /* the packed plane: th*m + r - 1 by tw*m + r - 1 */
  int64_t cb, ob;              /* channel blocks of 16 in and out */
  int64_t nb, nch, emax;       /* blocks, chunks, the most examples in a block */
  int64_t task_floats;         /* each task's V, M and plane */
  int ntask;
  atomic_llong next;
  const float *x, *w, *bias, *gy;
  float *out, *gx, *gw, *gb;
  float *U;                    /* [aa, C, O] (forward) */
  float *Ut;                   /* [aa, O, C] (input gradient) */
  float *dU;                   /* [nch, aa, C, O]: the chunk sums */
  float *scratch;              /* [ntask, task_floats] */
} wjob;

typedef struct {
  int64_t n0, e, T;            /* examples n0 .. n0 + e - 1, T = e * pt tiles */
  float *V, *M, *plane;        /* [aa, T, C], [aa, T, O], [Hq, Wq, 16] */
} blk;

static int64_t take(wjob *j) { return atomic_fetch_add(&j->next, 1); }

static blk block(const wjob *j, int64_t k, int t) {
  const int64_t aa = j->t.a * j->t.a, bt = j->emax * j->pt, N = j->g->N;
  float *s = j->scratch + t * j->task_floats;
  blk b = {N * k / j->nb, N * (k + 1) / j->nb - N * k / j->nb, 0, s, s + aa * bt * j->g->C,
           s + aa * bt * (j->g->C + j->g->O)};
  b.T = b.e * j->pt;
  return b;
}

TARGET INLINE __m512i lane_offsets(int64_t stride) {
  return _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                            _mm512_set1_epi32((int)stride));
}

/* b's plane for example n0 + nl, channel block c: the padded input, zeros around */
TARGET static void pack(const wjob *j, const blk *b, int64_t nl, int64_t c) {
  const dl_wino_geom *g = j->g;
  const int64_t H = g->H, W = g->W, Wq = j->Wq;
  const float *src = j->x + ((b->n0 + nl) * g->C + c * LANES) * H * W;
  __m512i idx = lane_offsets(H * W);
  memset(b->plane, 0, sizeof(float) * (size_t)(j->Hq * Wq * LANES));
  for (int64_t h = 0; h < H; h++)
    for (int64_t w = 0; w < W; w++)
      _mm512_storeu_ps(b->plane + ((h + g->ph) * Wq + w + g->pw) * LANES,
                       _mm512_i32gather_ps(idx, src + h * W + w, 4));
}

/* The four tile walks below (input_tiles, output_tiles, grad_tiles, input_grad) share the
 * (ty, tx) loop on purpose: each direction has its own vector loads and stores (contiguous,
 * gathered, scattered, accumulated) inline in the loop, which a shared walk would hide
 * behind a call per tile. */
/* V [xi, t, c block] for the tiles of example n0 + nl from its packed plane */
TARGET static void input_tiles(const wjob *j, const blk *b, int64_t nl, int64_t c) {
  const int a = j->t.a, m = j->t.m, aa = a * a;
  const int64_t C = j->g->C;
  __m512 d[WA * WA], v[WA * WA];
  for (int64_t ty = 0; ty < j->th; ty++)
    for (int64_t tx = 0; tx < j->tw; tx++) {
      const float *p = b->plane + (ty * m * j->Wq + tx * m) * LANES;
      for (int y = 0; y < a; y++)
        for (int x = 0; x < a; x++) d[y * a + x] = _mm512_loadu_ps(p + (y * j->Wq + x) * LANES);
      j->f.in(&j->t, d, v);
      float *dst = b->V + (nl * j->pt + ty * j->tw + tx) * C + c * LANES;
      for (int xi = 0; xi < aa; xi++) _mm512_storeu_ps(dst + xi * b->T * C, v[xi]);
    }
}

/* Y from M for example n0 + nl and output block o, + bias, scattered into out's NCHW planes */
TARGET static void output_tiles(const wjob *j, const blk *b, int64_t nl, int64_t o) {
  const dl_wino_geom *g = j->g;
  const int a = j->t.a, m = j->t.m, aa = a * a;
  const int64_t O = g->O, Ho = g->Ho, Wo = g->Wo;
  __m512i idx = lane_offsets(Ho * Wo);
  __m512 bias = j->bias ? _mm512_loadu_ps(j->bias + o * LANES) : _mm512_setzero_ps();
  float *dst = j->out + ((b->n0 + nl) * O + o * LANES) * Ho * Wo;
  __m512 mv[WA * WA], y[WA * WA];
  for (int64_t ty = 0; ty < j->th; ty++)
    for (int64_t tx = 0; tx < j->tw; tx++) {
      const float *src = b->M + (nl * j->pt + ty * j->tw + tx) * O + o * LANES;
      for (int xi = 0; xi < aa; xi++) mv[xi] = _mm512_loadu_ps(src + xi * b->T * O);
      j->f.out(&j->t, mv, y);
      for (int i = 0; i < m && ty * m + i < Ho; i++)
        for (int q = 0; q < m && tx * m + q < Wo; q++)
          _mm512_i32scatter_ps(dst + (ty * m + i) * Wo + tx * m + q, idx, _mm512_add_ps(y[i * m + q], bias), 4);
    }
}

/* dM [xi, t, o block] = A dY A^T for the tiles of example n0 + nl; positions past the output are 0 */
TARGET static void grad_tiles(const wjob *j, const blk *b, int64_t nl, int64_t o) {
  const dl_wino_geom *g = j->g;
  const int a = j->t.a, m = j->t.m, aa = a * a;
  const int64_t O = g->O, Ho = g->Ho, Wo = g->Wo;
  __m512i idx = lane_offsets(Ho * Wo);
  const float *src = j->gy + ((b->n0 + nl) * O + o * LANES) * Ho * Wo;
  __m512 dy[WA * WA], dm[WA * WA];
  for (int64_t ty = 0; ty < j->th; ty++)
    for (int64_t tx = 0; tx < j->tw; tx++) {
      for (int i = 0; i < m; i++)
        for (int q = 0; q < m; q++)
          dy[i * m + q] = ty * m + i < Ho && tx * m + q < Wo
                              ? _mm512_i32gather_ps(idx, src + (ty * m + i) * Wo + tx * m + q, 4)
                              : _mm512_setzero_ps();
      j->f.dout(&j->t, dy, dm);
      float *dst = b->M + (nl * j->pt + ty * j->tw + tx) * O + o * LANES;
      for (int xi = 0; xi < aa; xi++) _mm512_storeu_ps(dst + xi * b->T * O, dm[xi]);
    }
}

/* dx of example n0 + nl, channel block c: B dV B^T of each tile added into the plane, whose
 * interior goes to gx's NCHW planes */
TARGET static void input_grad(const wjob *j, const blk *b, int64_t nl, int64_t c) {
  const dl_wino_geom *g = j->g;
  const int a = j->t.a, m = j->t.m, aa = a * a;
  const int64_t C = g->C, H = g->H, W = g->W, Wq = j->Wq;
  memset(b->plane, 0, sizeof(float) * (size_t)(j->Hq * Wq * LANES));
  __m512 dv[WA * WA], dd[WA * WA];
  for (int64_t ty = 0; ty < j->th; ty++)
    for (int64_t tx = 0; tx < j->tw; tx++) {
      const float *src = b->V + (nl * j->pt + ty * j->tw + tx) * C + c * LANES;
      for (int xi = 0; xi < aa; xi++) dv[xi] = _mm512_loadu_ps(src + xi * b->T * C);
      j->f.din(&j->t, dv, dd);
      float *p = b->plane + (ty * m * Wq + tx * m) * LANES;
      for (int y = 0; y < a; y++)
        for (int x = 0; x < a; x++) {
          float *q = p + (y * Wq + x) * LANES;
          _mm512_storeu_ps(q, _mm512_add_ps(_mm512_loadu_ps(q), dd[y * a + x]));
        }
    }
  __m512i idx = lane_offsets(H * W);
  float *dst = j->gx + ((b->n0 + nl) * C + c * LANES) * H * W;
  for (int64_t h = 0; h < H; h++)
    for (int64_t w = 0; w < W; w++)
      _mm512_i32scatter_ps(dst + h * W + w, idx, _mm512_loadu_ps(b->plane + ((h + g->ph) * Wq + w + g->pw) * LANES),
                           4);
}

/* U [xi, c, o] (lanes over o) or, with transposed, Ut [xi, o, c] (lanes over c) from w [O, C, r, r] */
TARGET static void kernel_rows(const wjob *j, int64_t i, int transposed) {
  const dl_wino_geom *g = j->g;
  const int a = j->t.a, r = j->t.r, aa = a * a, rr = r * r;
  const int64_t C = g->C, O = g->O;
  /* row i: input channel c (U) or output channel o (Ut); its 16-lane blocks run over the other */
  int64_t blocks = transposed ? C / LANES : O / LANES, len = transposed ? C : O;
  __m512i idx = lane_offsets(transposed ? rr : C * rr);
  float *dst = (transposed ? j->Ut : j->U) + i * len;
  __m512 wv[WA * WA], u[WA * WA];
  for (int64_t b = 0; b < blocks; b++) {
    const float *src = transposed ? j->w + (i * C + b * LANES) * rr : j->w + (b * LANES * C + i) * rr;
    for (int k = 0; k < rr; k++) wv[k] = _mm512_i32gather_ps(idx, src + k, 4);
    j->f.ker(&j->t, wv, u);
    for (int xi = 0; xi < aa; xi++) _mm512_storeu_ps(dst + xi * C * O + b * LANES, u[xi]);
  }
}

/* gw [o block, c, r, r] = G^T dU G for input channel c, dU the chunk sums added in chunk order */
TARGET static void weight_grad_row(const wjob *j, int64_t c) {
  const dl_wino_geom *g = j->g;
  const int a = j->t.a, r = j->t.r, aa = a * a, rr = r * r;
  const int64_t C = g->C, O = g->O;
  __m512i idx = lane_offsets(C * rr);
  __m512 du[WA * WA], dw[WA * WA];
  for (int64_t b = 0; b < O / LANES; b++) {
    for (int xi = 0; xi < aa; xi++) {
      const float *p = j->dU + (xi * C + c) * O + b * LANES;
      du[xi] = _mm512_loadu_ps(p);
      for (int64_t k = 1; k < j->nch; k++) du[xi] = _mm512_add_ps(du[xi], _mm512_loadu_ps(p + k * aa * C * O));
    }
    j->f.dker(&j->t, du, dw);
    float *dst = j->gw + (b * LANES * C + c) * rr;
    for (int k = 0; k < rr; k++) _mm512_i32scatter_ps(dst + k, idx, dw[k], 4);
  }
}

/* ------------------------------------------------------------ the pool tasks */

static void task_kernel(void *arg, int t) {      /* U, or Ut when U is not wanted */
  wjob *j = arg;
  int transposed = j->U == NULL;
  int64_t rows = transposed ? j->g->O : j->g->C;
  (void)t;
  for (int64_t i; (i = take(j)) < rows;) kernel_rows(j, i, transposed);
}

static void task_forward(void *arg, int t) {
  wjob *j = arg;
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
  wjob *j = arg;
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
  wjob *j = arg;
  (void)t;
  for (int64_t c; (c = take(j)) < j->g->C;) weight_grad_row(j, c);
}

/* the bias gradient, 16 output channels per item (their rows of one example are contiguous, so
 * the reads stream): each channel's double sum over the examples in order of its row sums */
static void task_bias_grad(void *arg, int t) {
  wjob *j = arg;
  const dl_wino_geom *g = j->g;
  const int64_t P = g->Ho * g->Wo;
  (void)t;
  for (int64_t b; (b = take(j)) < g->O / LANES;) {
    double acc[LANES] = {0};
    for (int64_t n = 0; n < g->N; n++)
      for (int o = 0; o < LANES; o++) acc[o] += dl_conv_row_sum(j->gy + (n * g->O + b * LANES + o) * P, P);
    for (int o = 0; o < LANES; o++) j->gb[b * LANES + o] = (float)acc[o];
  }
}

static void run(dl_ctx *ctx, wjob *j, void (*fn)(void *, int)) {
  atomic_store(&j->next, 0);
  dl_pool_run(ctx->pool, j->ntask, fn, j);
}

/* ------------------------------------------------------------ the entry points */

static void setup(dl_ctx *ctx, const dl_wino_geom *g, wjob *j) {
  memset(j, 0, sizeof *j);
  j->g = g;
  make_mats(tile_m(g), (int)g->k, &j->t);
  j->f = pick(&j->t);
  j->th = (g->Ho + j->t.m - 1) / j->t.m;
  j->tw = (g->Wo + j->t.m - 1) / j->t.m;
  j->pt = j->th * j->tw;
  j->Hq = j->th * j->t.m + g->k - 1;
  j->Wq = j->tw * j->t.m + g->k - 1;
  j->cb = g->C / LANES;
  j->ob = g->O / LANES;
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
  j->task_floats = aa * j->emax * j->pt * (g->C + g->O) + j->Hq * j->Wq * LANES;
  int th = dl_pool_threads(ctx->pool);
  j->ntask = th < j->nb ? th : (int)j->nb;
  if (j->ntask < 1) j->ntask = 1;
}

/* a float32 scratch tensor of n elements, or NULL with ctx's error set */
static dl_tensor *scratch(dl_ctx *ctx, int64_t n) {
  int64_t sh[1] = {n};
  return dl_tensor_new_empty(ctx, DL_F32, 1, sh);
}

int dl_wino_forward(dl_ctx *ctx, const dl_wino_geom *g, const float *x, const float *w, const float *bias,
                    float *out) {
  if (g->N == 0) return 0;
  wjob j;
  setup(ctx, g, &j);
  const int64_t aa = j.t.a * j.t.a;
  dl_tensor *U = scratch(ctx, aa * g->C * g->O);
  dl_tensor *S = U ? scratch(ctx, j.ntask * j.task_floats) : NULL;
  if (S) {
    j.x = x; j.w = w; j.bias = bias; j.out = out;
    j.U = U->st->data; j.scratch = S->st->data;
    run(ctx, &j, task_kernel);
    run(ctx, &j, task_forward);
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
  wjob j;
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
    if (Ut) { j.Ut = Ut->st->data; run(ctx, &j, task_kernel); }
    run(ctx, &j, task_backward);
    if (gw) run(ctx, &j, task_weight_grad);
  }
  dl_tensor_release(S); dl_tensor_release(dU); dl_tensor_release(Ut);
  return S ? 0 : -1;
}

#else

int dl_wino_forward(dl_ctx *ctx, const dl_wino_geom *g, const float *x, const float *w, const float *bias,
                    float *out) {
  (void)g; (void)x; (void)w; (void)bias; (void)out;
  dl_fail(ctx, "conv2d: the Winograd kernels need an AVX-512 build");
  return -1;
}

int dl_wino_backward(dl_ctx *ctx, const dl_wino_geom *g, const float *x, const float *w, const float *gy, float *gx,
                     float *gw, float *gb) {
  (void)g; (void)x; (void)w; (void)gy; (void)gx; (void)gw; (void)gb;
  dl_fail(ctx, "conv2d: the Winograd kernels need an AVX-512 build");
  return -1;
}

#endif

/* attention.c -- fused scaled dot-product attention: the kernel of nn.MultiheadAttention,
 * recorded on the tape as scaled_dot_product_attention.
 *
 * Forward:  q [B, H, T, D], k [B, H, S, D], v [B, H, S, Dv] -> out [B, H, T, Dv],
 *           out = softmax(scale * q k^T + mask) v, row by row over the S keys.
 *           causal: query i sees keys j <= i (torch's is_causal: the mask is aligned to
 *           the top left, the same as aligned to the end when T == S).
 *           mask (optional): broadcast to [B, H, T, S] (sizes 1 or equal, aligned right);
 *           uint8 = keep where non-zero (torch's boolean mask), a float mask of q's dtype
 *           is added to the scores. A row with every key masked gives NaN, as torch.
 * Backward: dout [B, H, T, Dv] -> dq, dk, dv of the shapes of q, k, v:
 *           P = the probabilities recomputed from the saved row statistics (max m and
 *           sum l of exp(s - m), both double), never stored as a [T, S] tensor;
 *           dv = P^T dout, dP = dout v^T, dS = P (dP - rowsum(dout * out)),
 *           dq = scale dS k, dk = scale dS^T q. The mask gets no gradient.
 *
 * Work: one (b, h) pair is one unit, done by one thread in blocks of BR query rows (fewer
 * under causal, where a block computes only the keys up to its last row), each
 * block's scores [BR, S] in per-task scratch (single-threaded gemm). The pairs are split
 * over the pool in contiguous ranges; a pair's arithmetic does not depend on which task
 * runs it, so results are bit-identical at any thread count.
 * Numerics: the row max is subtracted before exp; the row sum and rowsum(dout * out)
 * accumulate in double; the products are float32 sgemm for float32 (error ~ D * 2^-24
 * relative to |q||k|), dgemm for float64.
 */
/* See LICENSE */
#include "ops/ops.h"
#include "ops/kernels.h"

#include <math.h>
#include <stdio.h>

#define BR 128       /* query rows per block (the scratch's size) */
#define BR_CAUSAL 32 /* under causal: a block needs keys up to its last row, so smaller blocks skip more */

typedef struct {
  dl_dtype d;
  int64_t BH, H, T, S, D, Dv;
  double scale;
  int causal;
  const void *q, *k, *v;     /* contiguous [BH, T, D], [BH, S, D], [BH, S, Dv] */
  const void *mask;          /* element (b, h, i, j) at b*ms[0] + h*ms[1] + i*ms[2] + j*ms[3], or NULL */
  dl_dtype mdtype;
  int64_t ms[4];
  void *out;                 /* [BH, T, Dv] */
  double *stats;             /* [BH, T, 2]: row max, row sum of exp(s - max) */
  const void *dout;          /* backward: [BH, T, Dv] */
  void *dq, *dk, *dv;        /* backward: [BH, T, D], [BH, S, D] and [BH, S, Dv], dk and dv zeroed */
  int64_t rows;              /* query rows per block: BR, or BR_CAUSAL under causal */
  char *scratch;             /* per task: 2 * BR * S elements */
  int64_t chunk;             /* pairs per task */
} attn_job;

/* keys a block of rows r0.. needs: all S, or under causal only j <= the block's last row */
static int64_t block_cols(const attn_job *j, int64_t r0, int64_t br) {
  if (!j->causal) return j->S;
  return r0 + br < j->S ? r0 + br : j->S;
}

/* scores of rows r0..r0+br of pair bh into P [br, ld = S], cols [0, nc): scale q k^T + mask,
 * masked entries -inf. When st (forward), the row max and sum are computed and stored;
 * otherwise they are read. Either way P becomes exp(s - max) / sum. */
#define PROBS(T_, EXP)                                                                         \
  {                                                                                            \
    T_ *P = (T_ *)Pv;                                                                          \
    for (int64_t r = 0; r < br; r++) {                                                         \
      int64_t i = r0 + r;                                                                      \
      T_ *p = P + r * S;                                                                       \
      int64_t lim = j->causal ? (i + 1 < nc ? i + 1 : nc) : nc; /* cols [lim, nc) masked */  \
      if (j->mask) {                                                                           \
        int64_t b = bh / j->H, h = bh % j->H;                                                  \
        int64_t base = b * j->ms[0] + h * j->ms[1] + i * j->ms[2];                             \
        if (j->mdtype == DL_U8) {                                                              \
          const uint8_t *m = (const uint8_t *)j->mask + base;                                  \
          for (int64_t c = 0; c < lim; c++)                                                    \
            if (!m[c * j->ms[3]]) p[c] = (T_)-INFINITY;                                        \
        } else {                                                                               \
          const T_ *m = (const T_ *)j->mask + base;                                            \
          for (int64_t c = 0; c < lim; c++) p[c] += m[c * j->ms[3]];                           \
        }                                                                                      \
      }                                                                                        \
      for (int64_t c = lim; c < nc; c++) p[c] = (T_)-INFINITY;                                 \
      double *s = j->stats + (bh * j->T + i) * 2;                                              \
      if (fw) {                     /* e = exp(s - max) kept in p, then scaled: the values */ \
        T_ mx = (T_)-INFINITY;      /* of the else branch, bit for bit                     */ \
        for (int64_t c = 0; c < nc; c++) if (p[c] > mx) mx = p[c];                             \
        for (int64_t c = 0; c < nc; c++) p[c] = EXP(p[c] - mx);                                \
        double a4[4] = {0, 0, 0, 0}; /* four running sums, then added: a short chain */         \
        int64_t c4 = nc / 4 * 4;                                                               \
        for (int64_t c = 0; c < c4; c += 4)                                                    \
          for (int u = 0; u < 4; u++) a4[u] += (double)p[c + u];                               \
        for (int64_t c = c4; c < nc; c++) a4[c - c4] += (double)p[c];                          \
        double sum = (a4[0] + a4[1]) + (a4[2] + a4[3]);                                        \
        s[0] = (double)mx;                                                                     \
        s[1] = sum;                                                                            \
        double inv = 1.0 / sum;                                                                \
        for (int64_t c = 0; c < nc; c++) p[c] = (T_)((double)p[c] * inv);                      \
      } else {                                                                                 \
        T_ mx = (T_)s[0];                                                                      \
        double inv = 1.0 / s[1];                                                               \
        for (int64_t c = 0; c < nc; c++) p[c] = (T_)((double)EXP(p[c] - mx) * inv);           \
      }                                                                                        \
    }                                                                                          \
  }

static void probs(const attn_job *j, int64_t bh, int64_t r0, int64_t br, int64_t nc, void *Pv, int fw) {
  int64_t S = j->S;
  size_t es = dl_dtype_size(j->d);
  const char *q = (const char *)j->q + (size_t)((bh * j->T + r0) * j->D) * es;
  const char *k = (const char *)j->k + (size_t)(bh * S * j->D) * es;
  /* P [br, nc] = scale q_blk [br, D] k[0:nc]^T */
  dl_gemm_serial(j->d, 0, 1, br, nc, j->D, j->scale, q, j->D, k, j->D, 0.0, Pv, S);
  if (j->d == DL_F32) PROBS(float, expf) else PROBS(double, exp)
}
#undef PROBS

static void fw_task(void *arg, int t) {
  const attn_job *j = arg;
  size_t es = dl_dtype_size(j->d);
  void *P = j->scratch + (size_t)t * 2 * BR * j->S * es;
  int64_t e = (t + 1) * j->chunk < j->BH ? (t + 1) * j->chunk : j->BH;
  for (int64_t bh = t * j->chunk; bh < e; bh++)
    for (int64_t r0 = 0; r0 < j->T; r0 += j->rows) {
      int64_t br = j->T - r0 < j->rows ? j->T - r0 : j->rows, nc = block_cols(j, r0, br);
      probs(j, bh, r0, br, nc, P, 1);
      /* out_blk [br, Dv] = P [br, nc] v[0:nc] [nc, Dv] */
      dl_gemm_serial(j->d, 0, 0, br, j->Dv, nc, 1.0, P, j->S, (const char *)j->v + (size_t)(bh * j->S * j->Dv) * es,
                     j->Dv, 0.0, (char *)j->out + (size_t)((bh * j->T + r0) * j->Dv) * es, j->Dv);
    }
}

/* dS = P (dP - rowsum(dout * out)) in place of dP, rows [0, br), cols [0, nc) */
#define DSCORES(T_)                                                                            \
  {                                                                                            \
    const T_ *P = (const T_ *)Pv, *go = (const T_ *)gov, *o = (const T_ *)ov;                  \
    T_ *dP = (T_ *)dPv;                                                                        \
    for (int64_t r = 0; r < br; r++) {                                                         \
      double di = 0;                                                                           \
      for (int64_t c = 0; c < Dv; c++) di += (double)go[r * Dv + c] * (double)o[r * Dv + c];   \
      for (int64_t c = 0; c < nc; c++)                                                         \
        dP[r * S + c] = (T_)((double)P[r * S + c] * ((double)dP[r * S + c] - di));             \
    }                                                                                          \
  }

static void bw_task(void *arg, int t) {
  const attn_job *j = arg;
  size_t es = dl_dtype_size(j->d);
  int64_t S = j->S, D = j->D, Dv = j->Dv;
  void *Pv = j->scratch + (size_t)t * 2 * BR * S * es;
  void *dPv = (char *)Pv + (size_t)BR * S * es;
  int64_t e = (t + 1) * j->chunk < j->BH ? (t + 1) * j->chunk : j->BH;
  for (int64_t bh = t * j->chunk; bh < e; bh++) {
    const char *k = (const char *)j->k + (size_t)(bh * S * D) * es;
    const char *v = (const char *)j->v + (size_t)(bh * S * Dv) * es;
    char *dk = (char *)j->dk + (size_t)(bh * S * D) * es;
    char *dv = (char *)j->dv + (size_t)(bh * S * Dv) * es;
    for (int64_t r0 = 0; r0 < j->T; r0 += j->rows) {
      int64_t br = j->T - r0 < j->rows ? j->T - r0 : j->rows, nc = block_cols(j, r0, br);
      const char *q = (const char *)j->q + (size_t)((bh * j->T + r0) * D) * es;
      const char *gov = (const char *)j->dout + (size_t)((bh * j->T + r0) * Dv) * es;
      const char *ov = (const char *)j->out + (size_t)((bh * j->T + r0) * Dv) * es;
      probs(j, bh, r0, br, nc, Pv, 0);
      /* dv[0:nc] [nc, Dv] += P^T [nc, br] dout_blk [br, Dv] */
      dl_gemm_serial(j->d, 1, 0, nc, Dv, br, 1.0, Pv, S, gov, Dv, 1.0, dv, Dv);
      /* dP [br, nc] = dout_blk [br, Dv] v[0:nc]^T */
      dl_gemm_serial(j->d, 0, 1, br, nc, Dv, 1.0, gov, Dv, v, Dv, 0.0, dPv, S);
      if (j->d == DL_F32) DSCORES(float) else DSCORES(double)
      /* dq_blk [br, D] = scale dS [br, nc] k[0:nc] [nc, D] */
      dl_gemm_serial(j->d, 0, 0, br, D, nc, j->scale, dPv, S, k, D, 0.0,
                     (char *)j->dq + (size_t)((bh * j->T + r0) * D) * es, D);
      /* dk[0:nc] [nc, D] += scale dS^T [nc, br] q_blk [br, D] */
      dl_gemm_serial(j->d, 1, 0, nc, D, br, j->scale, dPv, S, q, D, 1.0, dk, D);
    }
  }
}
#undef DSCORES

/* t itself (retained) when contiguous, else a contiguous copy */
static dl_tensor *contig(dl_ctx *ctx, dl_tensor *t) {
  return dl_is_contiguous(t) ? dl_tensor_retain(t) : dl_tensor_new_contiguous(ctx, t, t->dtype);
}

/* runs fn over the pairs with per-task scratch; 0 or -1 (memory) */
static int run(dl_ctx *ctx, attn_job *j, void (*fn)(void *, int)) {
  if (j->BH == 0 || j->T == 0) return 0;
  j->rows = j->causal ? BR_CAUSAL : BR;
  int threads = dl_pool_threads(ctx->pool);
  int64_t ntask = j->BH < threads ? j->BH : (threads < 1 ? 1 : threads);
  j->chunk = (j->BH + ntask - 1) / ntask;
  ntask = (j->BH + j->chunk - 1) / j->chunk;
  size_t bytes = (size_t)ntask * 2 * BR * (size_t)(j->S > 0 ? j->S : 1) * dl_dtype_size(j->d);
  j->scratch = dl_alloc(ctx, bytes);
  if (!j->scratch) return -1;
  dl_pool_run(ctx->pool, (int)ntask, fn, j);
  dl_free(ctx, j->scratch, bytes);
  return 0;
}

static void shape_str(char *buf, size_t n, const dl_tensor *t) {
  size_t at = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < t->ndim && at < n; d++)
    at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
  if (at < n) snprintf(buf + at, n - at, "]");
}

#define OP "scaled_dot_product_attention"

/* checks the shapes and the mask; fills j's sizes and mask strides */
static int check(dl_ctx *ctx, dl_tensor *q, dl_tensor *k, dl_tensor *v, dl_tensor *mask, attn_job *j) {
  char sq[96], sk[96], sv[96], sm[96];
  shape_str(sq, sizeof sq, q); shape_str(sk, sizeof sk, k); shape_str(sv, sizeof sv, v);
  if (q->ndim != 4) return dl_fail(ctx, OP ": q %s must be [B, H, T, D]", sq), -1;
  if (!dl_dtype_is_float(q->dtype)) return dl_fail(ctx, OP ": expected float tensors, got q %s", dl_dtype_name(q->dtype)), -1;
  if (k->dtype != q->dtype || v->dtype != q->dtype)
    return dl_fail(ctx, OP ": q, k and v must have one dtype, got %s, %s and %s", dl_dtype_name(q->dtype),
                   dl_dtype_name(k->dtype), dl_dtype_name(v->dtype)), -1;
  if (k->ndim != 4 || k->shape[0] != q->shape[0] || k->shape[1] != q->shape[1] || k->shape[3] != q->shape[3])
    return dl_fail(ctx, OP ": k %s does not match q %s (expected [%lld, %lld, S, %lld])", sk, sq,
                   (long long)q->shape[0], (long long)q->shape[1], (long long)q->shape[3]), -1;
  if (v->ndim != 4 || v->shape[0] != q->shape[0] || v->shape[1] != q->shape[1] || v->shape[2] != k->shape[2])
    return dl_fail(ctx, OP ": v %s does not match k %s (expected [%lld, %lld, %lld, Dv])", sv, sk,
                   (long long)q->shape[0], (long long)q->shape[1], (long long)k->shape[2]), -1;
  j->d = q->dtype;
  j->H = q->shape[1];
  j->BH = q->shape[0] * q->shape[1];
  j->T = q->shape[2];
  j->S = k->shape[2];
  j->D = q->shape[3];
  j->Dv = v->shape[3];
  if (!mask) return 0;
  shape_str(sm, sizeof sm, mask);
  if (mask->dtype != DL_U8 && mask->dtype != q->dtype)
    return dl_fail(ctx, OP ": mask must be uint8 (keep where non-zero) or %s (added), got %s",
                   dl_dtype_name(q->dtype), dl_dtype_name(mask->dtype)), -1;
  int64_t full[4] = {q->shape[0], q->shape[1], j->T, j->S};
  if (mask->ndim > 4) return dl_fail(ctx, OP ": mask %s has more than 4 dimensions", sm), -1;
  for (int d = 0; d < 4; d++) {
    int md = d - (4 - mask->ndim);
    if (md < 0) { j->ms[d] = 0; continue; }
    if (mask->shape[md] != full[d] && mask->shape[md] != 1)
      return dl_fail(ctx, OP ": mask %s does not broadcast to [B, H, T, S] = [%lld, %lld, %lld, %lld]", sm,
                     (long long)full[0], (long long)full[1], (long long)full[2], (long long)full[3]), -1;
    j->ms[d] = mask->shape[md] == 1 ? 0 : mask->stride[md];
  }
  j->mdtype = mask->dtype;
  return 0;
}

dl_tensor *dl_attention(dl_ctx *ctx, dl_tensor *q, dl_tensor *k, dl_tensor *v, dl_tensor *mask, int causal,
                        double scale) {
  attn_job j = {0};
  if (check(ctx, q, k, v, mask, &j) < 0) return NULL;
  if (isnan(scale)) scale = j.D > 0 ? 1.0 / sqrt((double)j.D) : 1.0;
  j.scale = scale;
  j.causal = causal;
  int64_t oshape[4] = {q->shape[0], q->shape[1], j.T, j.Dv}, sshape[3] = {j.BH, j.T, 2};
  dl_tensor *qc = contig(ctx, q), *kc = qc ? contig(ctx, k) : NULL, *vc = kc ? contig(ctx, v) : NULL;
  dl_tensor *out = vc ? dl_tensor_new_empty(ctx, q->dtype, 4, oshape) : NULL;
  dl_tensor *st = out ? dl_tensor_new_empty(ctx, DL_F64, 3, sshape) : NULL;
  int rc = -1;
  if (st) {
    j.q = dl_data(qc); j.k = dl_data(kc); j.v = dl_data(vc);
    j.mask = mask ? dl_data(mask) : NULL;
    j.out = dl_data(out);
    j.stats = dl_data(st);
    rc = run(ctx, &j, fw_task);
  }
  dl_tensor_release(qc); dl_tensor_release(kc); dl_tensor_release(vc);
  if (rc < 0) {
    dl_tensor_release(out);
    dl_tensor_release(st);
    return NULL;
  }
  dl_tensor *in[3] = {q, k, v};
  dl_node *n = dl_tape_record(ctx, DL_OP_SCALED_DOT_PRODUCT_ATTENTION, &out, 3, in);
  if (!n) {
    dl_tensor_release(st);
    return out;
  }
  n->sc[0] = scale;
  n->iv[0] = causal;
  n->niv = 1;
  n->saved[1] = st;
  n->saved[2] = mask ? dl_tensor_retain(mask) : NULL;
  if (!(n->saved[0] = dl_detach(ctx, out))) {
    dl_tensor_release(out);
    return NULL;
  }
  return out;
}

int dl_bw_attention(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *mask = n->saved[2];
  attn_job j = {0};
  if (check(ctx, q, k, v, mask, &j) < 0) return -1;
  j.scale = n->sc[0];
  j.causal = (int)n->iv[0];
  dl_tensor *qc = contig(ctx, q), *kc = qc ? contig(ctx, k) : NULL, *vc = kc ? contig(ctx, v) : NULL;
  dl_tensor *gc = vc ? dl_tensor_new_contiguous(ctx, g, q->dtype) : NULL;
  dl_tensor *dq = gc ? dl_tensor_new_empty(ctx, q->dtype, 4, q->shape) : NULL;
  dl_tensor *dk = dq ? dl_tensor_new_zeros(ctx, q->dtype, 4, k->shape) : NULL;
  dl_tensor *dv = dk ? dl_tensor_new_zeros(ctx, q->dtype, 4, v->shape) : NULL;
  int rc = -1;
  if (dv) {
    j.q = dl_data(qc); j.k = dl_data(kc); j.v = dl_data(vc);
    j.mask = mask ? dl_data(mask) : NULL;
    j.out = dl_data(n->saved[0]);
    j.stats = dl_data(n->saved[1]);
    j.dout = dl_data(gc);
    j.dq = dl_data(dq); j.dk = dl_data(dk); j.dv = dl_data(dv);
    rc = run(ctx, &j, bw_task);
  }
  dl_tensor_release(qc); dl_tensor_release(kc); dl_tensor_release(vc); dl_tensor_release(gc);
  return dl_grads_out(rc < 0, gin, 3, (dl_tensor *[]){dq, dk, dv});
}

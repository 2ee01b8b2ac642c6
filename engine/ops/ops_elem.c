/* ops_elem.c -- elementwise ops with NumPy broadcasting, and their backwards.
 *
 * Each forward picks the result's dtype, computes with the loops of
 * elem_kernels.c and records its node; each backward is a few more kernel calls
 * (never a recording op), with the gradient of a broadcast operand summed back
 * to its shape by dl_sum_to.
 */
/* See LICENSE */
#include "ops/kernels.h"

/* --------------------------------------------------------- backwards */

static int grad_reduce(dl_ctx *ctx, dl_tensor *g, dl_tensor *like, dl_tensor **out) {
  if (!g) return -1;
  *out = dl_sum_to(ctx, g, like->ndim, like->shape);
  dl_tensor_release(g);
  return *out ? 0 : -1;
}

/* g [broadcast of a, b] -> ga [a's shape], gb [b's shape] */
int dl_bw_binary(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0], *b = n->in[1];
  int op = (int)n->iv[0];
  int need_a = a->requires_grad, need_b = b->requires_grad;
  dl_tensor *t = NULL, *u = NULL;
  switch (op) {
    case DL_ADD:
      if (need_a && grad_reduce(ctx, dl_tensor_retain(g), a, &gin[0]) < 0) return -1;
      if (need_b && grad_reduce(ctx, dl_tensor_retain(g), b, &gin[1]) < 0) return -1;
      return 0;
    case DL_SUB:
      if (need_a && grad_reduce(ctx, dl_tensor_retain(g), a, &gin[0]) < 0) return -1;
      if (need_b && grad_reduce(ctx, dl_unary_raw(ctx, DL_NEG, g), b, &gin[1]) < 0) return -1;
      return 0;
    case DL_MUL:
      if (need_a && grad_reduce(ctx, dl_binary_raw(ctx, DL_MUL, g, b, g->dtype), a, &gin[0]) < 0) return -1;
      if (need_b && grad_reduce(ctx, dl_binary_raw(ctx, DL_MUL, g, a, g->dtype), b, &gin[1]) < 0) return -1;
      return 0;
    case DL_DIV:
      if (need_a && grad_reduce(ctx, dl_binary_raw(ctx, DL_DIV, g, b, g->dtype), a, &gin[0]) < 0) return -1;
      if (need_b) {
        /* -g * a / b^2 = -(g * out) / b */
        t = dl_binary_raw(ctx, DL_MUL, g, n->saved[0], g->dtype);
        if (!t) return -1;
        u = dl_binary_raw(ctx, DL_DIV, t, b, g->dtype);
        dl_tensor_release(t);
        if (!u) return -1;
        t = dl_unary_raw(ctx, DL_NEG, u);
        dl_tensor_release(u);
        if (grad_reduce(ctx, t, b, &gin[1]) < 0) return -1;
      }
      return 0;
    case DL_POW: {
      /* as torch defines it at the edges: d/da is 0 where b == 0 (even at a == 0, where
       * b * a^(b-1) is 0 * inf), d/db is 0 where a == 0 and b >= 0 (out * log a is 0 * -inf
       * or 1 * -inf there) */
      dl_tensor *zero = dl_tensor_new_scalar(ctx, g->dtype, 0);
      if (!zero) return -1;
      int rc = 0;
      if (need_a) {
        /* g * b * a^(b-1) = g * b * out / a, computed without dividing by a */
        dl_tensor *one = dl_tensor_new_scalar(ctx, b->dtype, 1);
        dl_tensor *bm1 = one ? dl_binary_raw(ctx, DL_SUB, b, one, g->dtype) : NULL;
        dl_tensor_release(one);
        t = bm1 ? dl_binary_raw(ctx, DL_POW, a, bm1, g->dtype) : NULL;
        dl_tensor_release(bm1);
        u = t ? dl_binary_raw(ctx, DL_MUL, t, b, g->dtype) : NULL;
        dl_tensor_release(t);
        t = u ? dl_binary_raw(ctx, DL_MUL, u, g, g->dtype) : NULL;
        dl_tensor_release(u);
        dl_tensor *b0 = t ? dl_binary_raw(ctx, DL_EQ, b, zero, DL_U8) : NULL;
        u = b0 ? dl_where_raw(ctx, b0, zero, t, g->dtype) : NULL;
        dl_tensor_release(b0);
        dl_tensor_release(t);
        rc = grad_reduce(ctx, u, a, &gin[0]);
      }
      if (!rc && need_b) {
        dl_tensor *la = dl_unary_raw(ctx, DL_LOG, a);
        t = la ? dl_binary_raw(ctx, DL_MUL, la, n->saved[0], g->dtype) : NULL;
        dl_tensor_release(la);
        u = t ? dl_binary_raw(ctx, DL_MUL, t, g, g->dtype) : NULL;
        dl_tensor_release(t);
        dl_tensor *a0 = u ? dl_binary_raw(ctx, DL_EQ, a, zero, DL_U8) : NULL;
        dl_tensor *bp = a0 ? dl_binary_raw(ctx, DL_GE, b, zero, DL_U8) : NULL;
        dl_tensor *c = bp ? dl_binary_raw(ctx, DL_MUL, a0, bp, DL_U8) : NULL;
        t = c ? dl_where_raw(ctx, c, zero, u, g->dtype) : NULL;
        dl_tensor_release(a0); dl_tensor_release(bp); dl_tensor_release(c); dl_tensor_release(u);
        rc = grad_reduce(ctx, t, b, &gin[1]);
      }
      dl_tensor_release(zero);
      return rc;
    }
    case DL_MAXIMUM:
    case DL_MINIMUM: {
      /* the gradient goes to the selected operand, split evenly on ties (as torch):
       * a's share is w = [a beats b] + [a == b] / 2, b's is g - g * w */
      dl_tensor *m = dl_binary_raw(ctx, op == DL_MAXIMUM ? DL_GT : DL_LT, a, b, g->dtype);
      dl_tensor *e = m ? dl_binary_raw(ctx, DL_EQ, a, b, g->dtype) : NULL;
      dl_tensor *h = e ? dl_scale_shift_raw(ctx, e, 0.5, 0) : NULL;
      dl_tensor *w = h ? dl_binary_raw(ctx, DL_ADD, m, h, g->dtype) : NULL;
      dl_tensor_release(m); dl_tensor_release(e); dl_tensor_release(h);
      if (!w) return -1;
      dl_tensor *gw = dl_binary_raw(ctx, DL_MUL, g, w, g->dtype);
      dl_tensor_release(w);
      if (!gw) return -1;
      if (need_a && grad_reduce(ctx, dl_tensor_retain(gw), a, &gin[0]) < 0) {
        dl_tensor_release(gw);
        return -1;
      }
      int rc = need_b ? grad_reduce(ctx, dl_binary_raw(ctx, DL_SUB, g, gw, g->dtype), b, &gin[1]) : 0;
      dl_tensor_release(gw);
      return rc;
    }
    default:
      return 0;
  }
}

/* a [..], b [..] -> out [broadcast of a, b] */
dl_tensor *dl_binary(dl_ctx *ctx, dl_binop op, dl_tensor *a, dl_tensor *b) {
  dl_tensor *out = dl_binary_raw(ctx, op, a, b, dl_binary_dtype(op, a->dtype, b->dtype));
  if (!out || op >= DL_EQ) return out;
  static const dl_op ops[] = {DL_BINARY_OPS(DL_OP_ID_, , )};
  _Static_assert(sizeof ops / sizeof *ops == DL_EQ, "the differentiable binary ops come before the comparisons");
  dl_tensor *in[2] = {a, b};
  dl_node *n = dl_tape_record(ctx, ops[op], &out, 2, in);
  if (!n) return out;
  n->iv[0] = op;
  if ((op == DL_DIV || op == DL_POW) && !(n->saved[0] = dl_detach(ctx, out))) {
    dl_tensor_release(out);
    return NULL;
  }
  if ((op == DL_ADD || op == DL_SUB) && dl_node_edges_only(ctx, n) < 0) {   /* shapes suffice */
    dl_tensor_release(out);
    return NULL;
  }
  return out;
}

/* g [a's shape] -> ga [a's shape] */
int dl_bw_unary(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0], *out = n->saved[0];
  int op = (int)n->iv[0];
  dl_tensor *t = NULL, *r = NULL;
  switch (op) {
    case DL_NEG: r = dl_unary_raw(ctx, DL_NEG, g); break;
    case DL_EXP: r = dl_binary_raw(ctx, DL_MUL, g, out, g->dtype); break;
    case DL_LOG: r = dl_binary_raw(ctx, DL_DIV, g, a, g->dtype); break;
    case DL_SQRT:
      t = dl_binary_raw(ctx, DL_DIV, g, out, g->dtype);
      r = t ? dl_scale_shift_raw(ctx, t, 0.5, 0) : NULL;
      break;
    case DL_ABS:
      t = dl_unary_raw(ctx, DL_SIGN, a);
      r = t ? dl_binary_raw(ctx, DL_MUL, g, t, g->dtype) : NULL;
      break;
    case DL_RELU:               /* g where a > 0, that is where out > 0 */
      r = dl_binary_raw(ctx, DL_B_MASK, g, out, g->dtype);
      break;
    case DL_SIGMOID:            /* g * s * (1 - s) */
      t = dl_scale_shift_raw(ctx, out, -1, 1);
      if (t) {
        dl_tensor *u = dl_binary_raw(ctx, DL_MUL, t, out, g->dtype);
        dl_tensor_release(t);
        t = u;
        r = t ? dl_binary_raw(ctx, DL_MUL, g, t, g->dtype) : NULL;
      }
      break;
    case DL_TANH:               /* g * (1 - y^2) */
      t = dl_unary_raw(ctx, DL_SQUARE, out);
      if (t) {
        dl_tensor *u = dl_scale_shift_raw(ctx, t, -1, 1);
        dl_tensor_release(t);
        t = u;
        r = t ? dl_binary_raw(ctx, DL_MUL, g, t, g->dtype) : NULL;
      }
      break;
    case DL_GELU:
      t = dl_unary_raw(ctx, DL_U_GELU_GRAD, a);
      r = t ? dl_binary_raw(ctx, DL_MUL, g, t, g->dtype) : NULL;
      break;
    case DL_SIGN:
      r = dl_tensor_new_zeros(ctx, g->dtype, a->ndim, a->shape);
      break;
    case DL_SQUARE:
      t = dl_binary_raw(ctx, DL_MUL, g, a, g->dtype);
      r = t ? dl_scale_shift_raw(ctx, t, 2, 0) : NULL;
      break;
    case DL_RSQRT:              /* -0.5 * g * y^3 */
      t = dl_unary_raw(ctx, DL_SQUARE, out);
      if (t) {
        dl_tensor *u = dl_binary_raw(ctx, DL_MUL, t, out, g->dtype);
        dl_tensor_release(t);
        t = u ? dl_binary_raw(ctx, DL_MUL, u, g, g->dtype) : NULL;
        dl_tensor_release(u);
        r = t ? dl_scale_shift_raw(ctx, t, -0.5, 0) : NULL;
      }
      break;
    default:                    /* the ops from DL_SIN on: g * op'(a), from the derivative kernel */
      t = dl_unary_raw(ctx, DL_U_DERIV + op, a);
      r = t ? dl_binary_raw(ctx, DL_MUL, g, t, g->dtype) : NULL;
      break;
  }
  dl_tensor_release(t);
  if (!r) return -1;
  gin[0] = r;
  return 0;
}

/* a [..] -> out [a's shape] */
dl_tensor *dl_unary(dl_ctx *ctx, dl_unop op, dl_tensor *a) {
  dl_tensor *out = dl_unary_raw(ctx, op, a);
  if (!out) return NULL;
  static const dl_op ops[] = {DL_UNARY_OPS(DL_OP_ID_, , )};
  _Static_assert(sizeof ops / sizeof *ops == DL_NUNARY, "an op table row for every unary op");
  if (!dl_dtype_is_float(a->dtype)) return out;
  dl_node *n = dl_tape_record(ctx, ops[op], &out, 1, &a);
  if (!n) return out;
  n->iv[0] = op;
  if ((op == DL_EXP || op == DL_SQRT || op == DL_SIGMOID || op == DL_TANH || op == DL_RSQRT || op == DL_RELU) &&
      !(n->saved[0] = dl_detach(ctx, out))) {
    dl_tensor_release(out);
    return NULL;
  }
  /* relu's mask comes from its output (out > 0 exactly where a > 0), which the next layer
   * keeps anyway: the input (a norm's output, say) need not stay alive for it */
  if (op == DL_RELU && dl_node_edges_only(ctx, n) < 0) {
    dl_tensor_release(out);
    return NULL;
  }
  return out;
}

/* ------------------------------------------------- scale/shift and clamp */

int dl_bw_scale(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  gin[0] = dl_scale_shift_raw(ctx, g, n->sc[0], 0);
  return gin[0] ? 0 : -1;
}

dl_tensor *dl_scale_shift(dl_ctx *ctx, dl_tensor *a, double scale, double shift) {
  dl_tensor *out = dl_scale_shift_raw(ctx, a, scale, shift);
  if (!out) return NULL;
  dl_node *nd = dl_tape_record(ctx, DL_OP_SCALE, &out, 1, &a);
  if (nd) nd->sc[0] = scale;
  return out;
}

int dl_bw_clamp(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0];
  dl_tensor *m = dl_tensor_new_empty(ctx, g->dtype, a->ndim, a->shape);
  if (!m) return -1;
  int64_t k = dl_numel(a);
  for (int64_t i = 0; i < k; i++) {
    double v = dl_get_flat(a, i);
    dl_store(m->st->data, m->dtype, i, v >= n->sc[0] && v <= n->sc[1]);
  }
  gin[0] = dl_binary_raw(ctx, DL_MUL, g, m, g->dtype);
  dl_tensor_release(m);
  return gin[0] ? 0 : -1;
}

dl_tensor *dl_clamp(dl_ctx *ctx, dl_tensor *a, double lo, double hi) {
  if (lo > hi) return dl_fail(ctx, "clamp: min %g is greater than max %g", lo, hi);
  dl_tensor *out = dl_tensor_new_empty(ctx, a->dtype, a->ndim, a->shape);
  if (!out) return NULL;
  int64_t k = dl_numel(a);
  for (int64_t i = 0; i < k; i++) {
    double v = dl_get_flat(a, i);
    dl_store(out->st->data, out->dtype, i, v < lo ? lo : v > hi ? hi : v);
  }
  dl_node *n = dl_tape_record(ctx, DL_OP_CLAMP, &out, 1, &a);
  if (n) {
    n->sc[0] = lo;
    n->sc[1] = hi;
  }
  return out;
}

/* ------------------------------------------------------------- where */

int dl_bw_where(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *c = n->saved[0];
  dl_tensor *z = dl_tensor_new_scalar(ctx, g->dtype, 0);
  if (!z) return -1;
  int rc = 0;
  if (n->in[0]->requires_grad)
    rc |= grad_reduce(ctx, dl_where_raw(ctx, c, g, z, g->dtype), n->in[0], &gin[0]);
  if (!rc && n->in[1]->requires_grad)
    rc |= grad_reduce(ctx, dl_where_raw(ctx, c, z, g, g->dtype), n->in[1], &gin[1]);
  dl_tensor_release(z);
  return rc;
}

dl_tensor *dl_where(dl_ctx *ctx, dl_tensor *cond, dl_tensor *a, dl_tensor *b) {
  dl_tensor *out = dl_where_raw(ctx, cond, a, b, dl_dtype_promote(a->dtype, b->dtype));
  if (!out) return NULL;
  dl_tensor *in[2] = {a, b};
  dl_node *n = dl_tape_record(ctx, DL_OP_WHERE, &out, 2, in);
  if (n) n->saved[0] = dl_tensor_retain(cond);
  return out;
}

/* -------------------------------------------------------------- cast */

int dl_bw_cast(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  gin[0] = dl_tensor_new_contiguous(ctx, g, n->in[0]->dtype);
  return gin[0] ? 0 : -1;
}

dl_tensor *dl_cast(dl_ctx *ctx, dl_tensor *a, dl_dtype d) {
  dl_tensor *out = dl_tensor_new_contiguous(ctx, a, d);
  if (!out) return NULL;
  if (dl_dtype_is_float(d) && dl_dtype_is_float(a->dtype)) dl_tape_record(ctx, DL_OP_CAST, &out, 1, &a);
  return out;
}

/* ------------------------------------------------------------ in place */

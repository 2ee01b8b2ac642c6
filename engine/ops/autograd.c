/* autograd.c -- the op table and the backward walk, above every op file.
 *
 * The op table (ops.h DL_OP_TABLE) names each op's forward and backward; this
 * is the one file that holds its function pointers, so it may refer to every
 * op file and nothing under it refers back (ops record through tape.c).
 * backward() orders the nodes reachable from the root depth-first, then visits
 * them in reverse, calling each node's backward from the table with recording
 * off and routing the input gradients to the producing node or, for leaves,
 * into .grad (sums by kernels, never by a recording op). Afterwards the graph's
 * inputs are dropped (unless kept), so a second backward is a clear error.
 */
/* See LICENSE */
#include "ops/kernels.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the op table */

#define DL_OP_INFO_(id, name, fw, bw, lua) {name, #fw, #bw, lua, bw},
static const dl_op_info op_table[DL_NOPS] = {DL_OP_TABLE(DL_OP_INFO_)};
#undef DL_OP_INFO_

const dl_op_info *dl_op_get(dl_op op) { return &op_table[op]; }

/* the backward of DL_OP_FUNCTION: the one its creator (a binding) put in the node */
int dl_bw_function(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  if (!n->user_backward) {
    dl_fail(ctx, "backward of %s: the function has no backward", n->name);
    return -1;
  }
  return n->user_backward(ctx, n, g, gin);
}

/* ------------------------------------------------------------ the backward walk */

/* g is the caller's only reference to a fresh, private, contiguous buffer of t's
 * dtype and shape: the first gradient of a leaf can take it without a copy */
static int private_like(const dl_tensor *g, const dl_tensor *t) {
  return atomic_load(&g->refs) == 1 && atomic_load(&g->st->refs) == 1 && !g->grad_fn && !g->requires_grad &&
         g->dtype == t->dtype && g->offset == 0 && g->ndim == t->ndim &&
         !memcmp(g->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim) && dl_is_contiguous(g);
}

int dl_accumulate_grad(dl_ctx *ctx, dl_tensor *t, dl_tensor *g) {
  if (!t->grad && private_like(g, t)) {
    t->grad = dl_tensor_retain(g);   /* the caller releases its reference: t->grad is then the only one */
    return 0;
  }
  if (!t->grad) {
    dl_tensor *c = dl_tensor_new_contiguous(ctx, g, t->dtype);
    if (!c) return -1;
    if (c->ndim != t->ndim || memcmp(c->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim)) {
      dl_tensor *r = dl_sum_to(ctx, c, t->ndim, t->shape);
      dl_tensor_release(c);
      if (!r) return -1;
      c = dl_tensor_new_contiguous(ctx, r, t->dtype);
      dl_tensor_release(r);
      if (!c) return -1;
    }
    t->grad = c;
    return 0;
  }
  return dl_axpy_inplace(ctx, t->grad, 1, g);
}

static int add_into_node(dl_ctx *ctx, dl_node *n, dl_tensor *g) {
  if (!n->gacc) {
    n->gacc = dl_tensor_retain(g);
    return 0;
  }
  /* gacc may be shared with someone else's tensor: make a private sum */
  dl_tensor *s = dl_binary_raw(ctx, DL_ADD, n->gacc, g, dl_binary_dtype(DL_ADD, n->gacc->dtype, g->dtype));
  if (!s) return -1;
  dl_tensor_release(n->gacc);
  n->gacc = s;
  return 0;
}

typedef struct {
  dl_node **v;
  int n, cap;
} node_vec;

static int push(node_vec *s, dl_node *n) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    dl_node **v = realloc(s->v, sizeof *v * (size_t)cap);
    if (!v) return -1;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = n;
  return 0;
}

/* post-order DFS without recursion; mark: 1 = on stack, 2 = done */
static int topo(dl_node *root, node_vec *order) {
  node_vec stack = {0};
  int rc = 0;
  if (push(&stack, root) < 0) return -1;
  root->mark = 1;
  while (stack.n > 0 && rc == 0) {
    dl_node *n = stack.v[stack.n - 1];
    int pushed = 0;
    for (int i = 0; i < n->nin; i++) {
      dl_node *c = n->in[i] ? n->in[i]->grad_fn : NULL;
      if (c && c->mark == 0) {
        c->mark = 1;
        if (push(&stack, c) < 0) rc = -1;
        pushed = 1;
        break;
      }
    }
    if (!pushed) {
      stack.n--;
      n->mark = 2;
      if (push(order, n) < 0) rc = -1;
      else atomic_fetch_add(&((dl_node_ref *)n)->refs, 1);   /* released by release_order */
    }
  }
  free(stack.v);
  return rc;
}

/* clears the marks and gives back the references topo took */
static void release_order(node_vec *order) {
  for (int k = 0; k < order->n; k++) order->v[k]->mark = 0;
  for (int k = 0; k < order->n; k++) dl_node_release(order->v[k]);
  free(order->v);
}

int dl_backward(dl_ctx *ctx, dl_tensor *t, dl_tensor *g, int keep) {
  dl_tensor *g1 = NULL;
  if (!t->requires_grad) {
    dl_fail(ctx, "backward: tensor does not require grad (no recorded graph)");
    return -1;
  }
  if (!g) {
    if (dl_numel(t) != 1) {
      char s[128];
      dl_shape_str(t->shape, t->ndim, s, sizeof s);
      dl_fail(ctx, "backward: gradient can be implied only for one-element outputs, got shape %s", s);
      return -1;
    }
    g1 = dl_tensor_new_full(ctx, t->dtype, t->ndim, t->shape, 1);
    if (!g1) return -1;
    g = g1;
  } else if (dl_numel(g) != dl_numel(t)) {
    char a[128], b[128];
    dl_shape_str(t->shape, t->ndim, a, sizeof a);
    dl_shape_str(g->shape, g->ndim, b, sizeof b);
    dl_fail(ctx, "backward: gradient shape %s does not match output shape %s", b, a);
    return -1;
  }
  if (!t->grad_fn) {              /* a leaf */
    int rc = dl_accumulate_grad(ctx, t, g);
    dl_tensor_release(g1);
    return rc;
  }
  if (t->grad_fn->freed) {
    dl_tensor_release(g1);
    dl_fail(ctx, "backward: the graph has already been freed by an earlier backward "
                 "(pass keep_graph = true to the first one)");
    return -1;
  }
  node_vec order = {0};
  if (topo(t->grad_fn, &order) < 0) {
    release_order(&order);
    dl_tensor_release(g1);
    dl_fail(ctx, "backward: out of memory ordering the graph");
    return -1;
  }
  int saved_mode = ctx->grad_enabled;
  ctx->grad_enabled = 0;
  int rc = 0;
  dl_tensor *groot = g;
  if (g->ndim != t->ndim || memcmp(g->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim))
    groot = dl_view_new_reshape(ctx, g, t->ndim, t->shape);
  else
    dl_tensor_retain(groot);
  if (!groot) rc = -1;
  else {
    t->grad_fn->gacc = groot;
  }
  for (int k = order.n - 1; k >= 0 && rc == 0; k--) {
    dl_node *n = order.v[k];
    if (!n->gacc) continue;              /* no gradient flowed here */
    if (n->freed) {
      dl_fail(ctx, "backward: part of the graph (%s) was freed by an earlier backward", n->name);
      rc = -1;
      break;
    }
    dl_tensor *gin[4] = {NULL, NULL, NULL, NULL};
    if (op_table[n->op].fn(ctx, n, n->gacc, gin) < 0) {
      rc = -1;
    }
    for (int i = 0; i < n->nin; i++) {
      if (!gin[i]) continue;
      dl_tensor *x = n->in[i];
      if (rc == 0 && x->requires_grad) {
        if (x->grad_fn) rc = add_into_node(ctx, x->grad_fn, gin[i]);
        else rc = dl_accumulate_grad(ctx, x, gin[i]);
      }
      dl_tensor_release(gin[i]);
    }
    dl_tensor_release(n->gacc);
    n->gacc = NULL;
    /* no later node reads this one's inputs: dropping them now frees each activation
     * once the last node saving it has run, so the walk's peak is not all of them
     * plus the gradients of the first layers */
    if (!keep && rc == 0) dl_node_drop_inputs(n);
  }
  for (int k = 0; k < order.n; k++) {
    dl_node *n = order.v[k];
    dl_tensor_release(n->gacc);
    n->gacc = NULL;
    if (!keep && rc == 0) dl_node_drop_inputs(n);
  }
  ctx->grad_enabled = saved_mode;
  release_order(&order);
  dl_tensor_release(g1);
  return rc;
}

/* tape.c -- recording the define-by-run tape: nodes, their lifetime, detach.
 *
 * An op whose inputs require grad records a node holding its inputs (and any
 * saved tensors) as grad_fn of its output, through dl_tape_record: the one
 * way a node is made. The node keeps its op's id; its name comes from the op
 * table's strings, so this file refers to no op, and the core frees the node
 * through the destroy hook set here. Nodes never reference their own output,
 * so the tape has no cycles. An op whose backward needs only its inputs' shapes
 * swaps them for edges (dl_node_edges_only: the producer's node, the shape, no
 * data), so the tape does not keep those activations alive. The walk that
 * runs the nodes' backwards is autograd.c, above every op file; this file
 * calls only core/.
 */
/* See LICENSE */
#include "ops/ops.h"

#include <string.h>

/* the op table's names: its strings alone (autograd.c holds its functions) */
#define NAME_(id, name, fw, bw, lua) name,
static const char *const op_names[] = {DL_OP_TABLE(NAME_)};
#undef NAME_
_Static_assert(sizeof op_names / sizeof *op_names == DL_NOPS, "a name for every op");

int dl_needs_grad(dl_ctx *ctx, int n, dl_tensor **in) {
  if (!ctx->grad_enabled) return 0;
  for (int i = 0; i < n; i++)
    if (in[i] && in[i]->requires_grad) return 1;
  return 0;
}

/* ------------------------------------------------------------ recording */

static void node_destroy(dl_node *n);

dl_node *dl_tape_record(dl_ctx *ctx, dl_op op, dl_tensor **out, int nin, dl_tensor **in) {
  if (!*out || !dl_needs_grad(ctx, nin, in)) return NULL;
  dl_node *n = dl_alloc(ctx, sizeof *n);
  if (!n) {
    dl_tensor_release(*out);
    *out = NULL;
    return NULL;
  }
  memset(n, 0, sizeof *n);
  atomic_init(&n->ref.refs, 1);
  n->ref.destroy = node_destroy;
  n->ctx = ctx;
  n->op = op;
  n->name = op_names[op];
  n->nin = nin;
  for (int i = 0; i < nin; i++) n->in[i] = dl_tensor_retain(in[i]);
  dl_tensor *t = *out;
  t->requires_grad = 1;
  dl_node_release(t->grad_fn);
  t->grad_fn = n;
  return n;
}

int dl_node_edges_only(dl_ctx *ctx, dl_node *n) {
  for (int i = 0; i < n->nin; i++) {
    dl_tensor *x = n->in[i];
    if (!x || !x->grad_fn) continue;
    int64_t zero[1] = {0};
    dl_tensor *e = dl_tensor_new_empty(ctx, x->dtype, 1, zero);
    if (!e) return -1;
    e->ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++) {
      e->shape[d] = x->shape[d];
      e->stride[d] = 0;
    }
    e->requires_grad = 1;
    atomic_fetch_add(&((dl_node_ref *)x->grad_fn)->refs, 1);
    e->grad_fn = x->grad_fn;
    n->in[i] = e;
    dl_tensor_release(x);
  }
  return 0;
}

void dl_node_drop_inputs(dl_node *n) {
  for (int i = 0; i < n->nin; i++) {
    dl_tensor_release(n->in[i]);
    n->in[i] = NULL;
  }
  for (int i = 0; i < 3; i++) {
    dl_tensor_release(n->saved[i]);
    n->saved[i] = NULL;
  }
  if (n->user_free && n->user) n->user_free(n->user);
  n->user = NULL;
  n->freed = 1;
}

/* Called by the core's dl_node_release when the last reference goes. */
static void node_destroy(dl_node *n) {
  dl_tensor_release(n->gacc);
  dl_node_drop_inputs(n);
  dl_free(n->ctx, n, sizeof *n);
}

int dl_set_requires_grad(dl_ctx *ctx, dl_tensor *t, int flag) {
  if (flag && !dl_dtype_is_float(t->dtype)) {
    dl_fail(ctx, "requires_grad: only float tensors can require grad, got %s", dl_dtype_name(t->dtype));
    return -1;
  }
  if (!flag && t->grad_fn) {
    dl_fail(ctx, "requires_grad: cannot clear the flag of a non-leaf tensor (use detach)");
    return -1;
  }
  t->requires_grad = flag != 0;
  return 0;
}

dl_tensor *dl_detach(dl_ctx *ctx, dl_tensor *a) {
  return dl_view_new(ctx, a, a->ndim, a->shape, a->stride, a->offset);
}

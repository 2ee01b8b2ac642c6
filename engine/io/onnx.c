/* onnx.c -- the ONNX model writer (see onnx.h).
 *
 * The model is a tree of protobuf-c messages (onnx.pb-c.h, generated from Debian's
 * onnx.proto at build time) whose every string, array and sub-message comes from
 * malloc, protobuf-c's default allocator: protobuf_c_message_free_unpacked frees the
 * whole tree. Repeated fields grow by doubling (grow()); a half-built element is
 * attached only once complete, so a failure leaves the model as it was.
 */
/* See LICENSE */
#include "io/onnx.h"
#include "io/fileio.h"
#include <onnx.pb-c.h>   /* generated from onnx.proto by protoc-c (CMakeLists.txt) */

#include <stdlib.h>
#include <string.h>

struct dl_onnx {
  dl_ctx *ctx;
  Onnx__ModelProto *model;
  Onnx__GraphProto *graph;
  Onnx__NodeProto *last;    /* the node attributes go to */
  size_t cap_node, cap_init, cap_in, cap_out, cap_attr;
};

static int oom(dl_onnx *m) {
  dl_fail(m->ctx, "onnx: out of memory");
  m->ctx->oom = 1;
  return -1;
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

/* makes room for one more element in *arr (n used, *cap allocated) */
static int grow(dl_onnx *m, void *arr, size_t n, size_t *cap, size_t elem) {
  void **a = arr;
  if (n < *cap) return 0;
  size_t c = *cap ? *cap * 2 : 8;
  void *p = realloc(*a, c * elem);
  if (!p) return oom(m);
  *a = p;
  *cap = c;
  return 0;
}

static int check_name(dl_onnx *m, const char *what, const char *name) {
  if (!name || !*name) {
    dl_fail(m->ctx, "onnx: %s needs a non-empty name", what);
    return -1;
  }
  return 0;
}

static int elem_type(dl_onnx *m, dl_dtype d, const char *name) {
  switch (d) {
  case DL_F32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  case DL_F64: return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
  case DL_I32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
  case DL_I64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
  default:
    dl_fail(m->ctx, "onnx: '%s' has dtype %s; ONNX export takes float32, float64, int32 or int64",
            name, dl_dtype_name(d));
    return -1;
  }
}

dl_onnx *dl_onnx_new(dl_ctx *ctx, const char *producer, const char *version, int64_t opset) {
  if (opset < 7 || opset > 17) return dl_fail(ctx, "onnx: opset %lld is not one of 7 to 17", (long long)opset);
  dl_onnx *m = calloc(1, sizeof *m);
  Onnx__ModelProto *model = malloc(sizeof *model);
  Onnx__GraphProto *graph = malloc(sizeof *graph);
  Onnx__OperatorSetIdProto **ops = malloc(sizeof *ops);
  Onnx__OperatorSetIdProto *op = malloc(sizeof *op);
  char *prod = dup_str(producer ? producer : "dlua"), *ver = dup_str(version ? version : "");
  char *gname = dup_str("dlua");
  if (!m || !model || !graph || !ops || !op || !prod || !ver || !gname) {
    free(m); free(model); free(graph); free(ops); free(op); free(prod); free(ver); free(gname);
    ctx->oom = 1;
    return dl_fail(ctx, "onnx: out of memory");
  }
  onnx__model_proto__init(model);
  onnx__graph_proto__init(graph);
  onnx__operator_set_id_proto__init(op);
  op->has_version = 1;
  op->version = opset;
  ops[0] = op;
  model->has_ir_version = 1;
  model->ir_version = 8;
  model->n_opset_import = 1;
  model->opset_import = ops;
  model->producer_name = prod;
  model->producer_version = ver;
  graph->name = gname;
  model->graph = graph;
  m->ctx = ctx;
  m->model = model;
  m->graph = graph;
  return m;
}

void dl_onnx_free(dl_onnx *m) {
  if (!m) return;
  protobuf_c_message_free_unpacked(&m->model->base, NULL);
  free(m);
}

/* a ValueInfoProto for a tensor of type et with the given dims (negative: dyn) */
static Onnx__ValueInfoProto *value_info(const char *name, int et, int ndim, const int64_t *dims, const char *dyn) {
  Onnx__ValueInfoProto *v = malloc(sizeof *v);
  Onnx__TypeProto *tp = malloc(sizeof *tp);
  Onnx__TypeProto__Tensor *tt = malloc(sizeof *tt);
  Onnx__TensorShapeProto *sh = malloc(sizeof *sh);
  Onnx__TensorShapeProto__Dimension **dv = calloc(ndim > 0 ? (size_t)ndim : 1, sizeof *dv);
  char *nm = dup_str(name);
  if (v) onnx__value_info_proto__init(v);
  if (tp) onnx__type_proto__init(tp);
  if (tt) onnx__type_proto__tensor__init(tt);
  if (sh) onnx__tensor_shape_proto__init(sh);
  if (!v || !tp || !tt || !sh || !dv || !nm) goto fail;
  /* attached as they are made, so one free_unpacked of v releases a partial tree */
  v->name = nm;
  v->type = tp;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  tt->has_elem_type = 1;
  tt->elem_type = et;
  tt->shape = sh;
  sh->dim = dv;
  for (int i = 0; i < ndim; i++) {
    Onnx__TensorShapeProto__Dimension *d = malloc(sizeof *d);
    if (!d) return protobuf_c_message_free_unpacked(&v->base, NULL), NULL;
    onnx__tensor_shape_proto__dimension__init(d);
    dv[i] = d;
    sh->n_dim = (size_t)i + 1;
    if (dims[i] >= 0) {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d->dim_value = dims[i];
    } else {
      char *p = dup_str(dyn);
      if (!p) return protobuf_c_message_free_unpacked(&v->base, NULL), NULL;
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d->dim_param = p;
    }
  }
  return v;
fail:
  if (v && v->name) return protobuf_c_message_free_unpacked(&v->base, NULL), NULL;
  free(v); free(tp); free(tt); free(sh); free(dv); free(nm);
  return NULL;
}

int dl_onnx_value(dl_onnx *m, int output, const char *name, dl_dtype dtype, int ndim,
                  const int64_t *dims, const char *dyn) {
  if (check_name(m, output ? "a graph output" : "a graph input", name) < 0) return -1;
  int et = elem_type(m, dtype, name);
  if (et < 0) return -1;
  if (ndim < 0 || ndim > DL_MAXDIM) {
    dl_fail(m->ctx, "onnx: '%s' has %d dims (at most %d)", name, ndim, DL_MAXDIM);
    return -1;
  }
  for (int i = 0; i < ndim; i++) {
    if (dims[i] < 0 && (!dyn || !*dyn)) {
      dl_fail(m->ctx, "onnx: '%s' has a dynamic dim %d but no name for it", name, i + 1);
      return -1;
    }
  }
  Onnx__GraphProto *g = m->graph;
  size_t *n = output ? &g->n_output : &g->n_input;
  Onnx__ValueInfoProto ***arr = output ? &g->output : &g->input;
  if (grow(m, arr, *n, output ? &m->cap_out : &m->cap_in, sizeof **arr) < 0) return -1;
  Onnx__ValueInfoProto *v = value_info(name, et, ndim, dims, dyn);
  if (!v) return oom(m);
  (*arr)[(*n)++] = v;
  return 0;
}

int dl_onnx_initializer(dl_onnx *m, const char *name, const dl_tensor *t) {
  if (check_name(m, "an initializer", name) < 0) return -1;
  int et = elem_type(m, t->dtype, name);
  if (et < 0) return -1;
  Onnx__GraphProto *g = m->graph;
  if (grow(m, &g->initializer, g->n_initializer, &m->cap_init, sizeof *g->initializer) < 0) return -1;
  int64_t n = dl_numel(t);
  size_t es = dl_dtype_size(t->dtype);
  Onnx__TensorProto *tp = malloc(sizeof *tp);
  int64_t *dims = malloc((t->ndim > 0 ? (size_t)t->ndim : 1) * sizeof *dims);
  uint8_t *raw = malloc(n > 0 ? (size_t)n * es : 1);
  char *nm = dup_str(name);
  if (!tp || !dims || !raw || !nm) {
    free(tp); free(dims); free(raw); free(nm);
    return oom(m);
  }
  onnx__tensor_proto__init(tp);
  for (int i = 0; i < t->ndim; i++) dims[i] = t->shape[i];
  if (dl_is_contiguous(t)) {
    if (n > 0) memcpy(raw, dl_data(t), (size_t)n * es);
  } else {
    for (int64_t i = 0; i < n; i++) dl_store(raw, t->dtype, i, dl_get_flat(t, i));
  }
  /* raw_data is little-endian by the ONNX spec; the engine's build targets x86-64 */
  tp->n_dims = (size_t)t->ndim;
  tp->dims = dims;
  tp->has_data_type = 1;
  tp->data_type = et;
  tp->name = nm;
  tp->has_raw_data = 1;
  tp->raw_data.len = (size_t)n * es;
  tp->raw_data.data = raw;
  g->initializer[g->n_initializer++] = tp;
  return 0;
}

/* a malloc'd array of n copies of the strings in s */
static char **dup_strs(int n, const char *const *s) {
  char **a = calloc(n > 0 ? (size_t)n : 1, sizeof *a);
  if (!a) return NULL;
  for (int i = 0; i < n; i++) {
    a[i] = dup_str(s[i] ? s[i] : "");
    if (!a[i]) {
      for (int j = 0; j < i; j++) free(a[j]);
      free(a);
      return NULL;
    }
  }
  return a;
}

int dl_onnx_node(dl_onnx *m, const char *op, const char *name, int nin, const char *const *in,
                 int nout, const char *const *out) {
  if (check_name(m, "a node's op type", op) < 0) return -1;
  if (nin < 0 || nout < 1) {
    dl_fail(m->ctx, "onnx: node %s needs at least one output", op);
    return -1;
  }
  for (int i = 0; i < nout; i++) {
    if (!out[i] || !*out[i]) {
      dl_fail(m->ctx, "onnx: node %s: output %d has an empty name", op, i + 1);
      return -1;
    }
  }
  Onnx__GraphProto *g = m->graph;
  if (grow(m, &g->node, g->n_node, &m->cap_node, sizeof *g->node) < 0) return -1;
  Onnx__NodeProto *nd = malloc(sizeof *nd);
  if (!nd) return oom(m);
  onnx__node_proto__init(nd);
  nd->op_type = dup_str(op);
  nd->name = dup_str(name ? name : "");
  nd->input = dup_strs(nin, in);
  nd->n_input = nd->input ? (size_t)nin : 0;
  nd->output = dup_strs(nout, out);
  nd->n_output = nd->output ? (size_t)nout : 0;
  if (!nd->op_type || !nd->name || !nd->input || !nd->output) {
    protobuf_c_message_free_unpacked(&nd->base, NULL);
    return oom(m);
  }
  g->node[g->n_node++] = nd;
  m->last = nd;
  m->cap_attr = 0;
  return 0;
}

/* a new attribute named name of type ty, appended to the last node, or NULL */
static Onnx__AttributeProto *new_attr(dl_onnx *m, const char *name, Onnx__AttributeProto__AttributeType ty) {
  if (!m->last) {
    dl_fail(m->ctx, "onnx: attribute '%s' before any node", name ? name : "");
    return NULL;
  }
  if (check_name(m, "an attribute", name) < 0) return NULL;
  Onnx__NodeProto *nd = m->last;
  if (grow(m, &nd->attribute, nd->n_attribute, &m->cap_attr, sizeof *nd->attribute) < 0) return NULL;
  Onnx__AttributeProto *a = malloc(sizeof *a);
  char *nm = dup_str(name);
  if (!a || !nm) {
    free(a); free(nm);
    oom(m);
    return NULL;
  }
  onnx__attribute_proto__init(a);
  a->name = nm;
  a->has_type = 1;
  a->type = ty;
  return a;
}

static void attach(dl_onnx *m, Onnx__AttributeProto *a) { m->last->attribute[m->last->n_attribute++] = a; }

/* an INT attribute (value i) or a FLOAT one (value f) on the last node */
static int attr_scalar(dl_onnx *m, const char *name, Onnx__AttributeProto__AttributeType ty, int64_t i, float f) {
  Onnx__AttributeProto *a = new_attr(m, name, ty);
  if (!a) return -1;
  if (ty == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
    a->has_i = 1;
    a->i = i;
  } else {
    a->has_f = 1;
    a->f = f;
  }
  attach(m, a);
  return 0;
}

int dl_onnx_attr_int(dl_onnx *m, const char *name, int64_t v) {
  return attr_scalar(m, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, v, 0);
}

int dl_onnx_attr_float(dl_onnx *m, const char *name, float v) {
  return attr_scalar(m, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, 0, v);
}

int dl_onnx_attr_ints(dl_onnx *m, const char *name, int n, const int64_t *v) {
  if (n < 0) {
    dl_fail(m->ctx, "onnx: attribute '%s' has a negative length", name ? name : "");
    return -1;
  }
  Onnx__AttributeProto *a = new_attr(m, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  if (!a) return -1;
  a->ints = malloc((n > 0 ? (size_t)n : 1) * sizeof *a->ints);
  if (!a->ints) {
    protobuf_c_message_free_unpacked(&a->base, NULL);
    return oom(m);
  }
  if (n > 0) memcpy(a->ints, v, (size_t)n * sizeof *v);
  a->n_ints = (size_t)n;
  attach(m, a);
  return 0;
}

int dl_onnx_write(dl_onnx *m, const char *path) {
  size_t n = onnx__model_proto__get_packed_size(m->model);
  uint8_t *buf = malloc(n > 0 ? n : 1);
  if (!buf) return oom(m);
  size_t w = onnx__model_proto__pack(m->model, buf);
  int rc = 0;
  if (w != n) {
    dl_fail(m->ctx, "onnx: packed %zu bytes of %zu", w, n);
    rc = -1;
  } else {
    rc = dl_fileio_replace(m->ctx, path, buf, n);
  }
  free(buf);
  return rc;
}

/* test_onnx.c -- the ONNX writer (engine/io/onnx.c): a model written and read back with
 * protobuf-c's own unpacker has the fields that were put in (names, dynamic dims,
 * attributes, initializer bytes, strided tensors in row-major order); invalid
 * input is refused with a message and leaves the model usable. */
/* See LICENSE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <onnx.pb-c.h>

#include "dl_test.h"
#include "io/onnx.h"
#include "ops/ops.h"

static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
  *n = buf ? fread(buf, 1, (size_t)len, f) : 0;
  fclose(f);
  return buf;
}

int main(void) {
  dl_ctx *ctx = dl_ctx_new();
  char path[256];
  snprintf(path, sizeof path, "/tmp/dlua-test-onnx-%d.onnx", (int)getpid());

  DL_CHECK(dl_onnx_new(ctx, "dlua", "0", 6) == NULL);
  DL_CHECK(strstr(ctx->err, "opset 6 is not one of 7 to 17") != NULL);

  dl_onnx *m = dl_onnx_new(ctx, "dlua", "0.1.0", 13);
  DL_CHECK(m != NULL);
  int64_t in_dims[] = {-1, 3, 2};
  DL_CHECK(dl_onnx_value(m, 0, "x", DL_F32, 3, in_dims, "batch") == 0);
  DL_CHECK(dl_onnx_value(m, 1, "y", DL_F32, 3, in_dims, NULL) < 0);       /* dynamic without a name */
  DL_CHECK(strstr(ctx->err, "'y' has a dynamic dim 1 but no name") != NULL);
  DL_CHECK(dl_onnx_value(m, 1, "y", DL_U8, 3, in_dims, "batch") < 0);
  DL_CHECK(strstr(ctx->err, "dtype uint8") != NULL);
  DL_CHECK(dl_onnx_value(m, 1, "", DL_F32, 3, in_dims, "batch") < 0);
  DL_CHECK(dl_onnx_value(m, 1, "y", DL_F32, 3, in_dims, "batch") == 0);

  /* a [2, 3] arange transposed to [3, 2]: written in row-major order of the view */
  int64_t shape[] = {2, 3};
  dl_tensor *a = dl_tensor_new_arange(ctx, DL_F32, 0, 6, 1);
  dl_tensor *a2 = dl_view(ctx, a, 2, shape);
  dl_tensor *t = dl_transpose(ctx, a2, 0, 1);
  DL_CHECK(t && !dl_is_contiguous(t));
  DL_CHECK(dl_onnx_initializer(m, "w", t) == 0);
  dl_tensor *ids = dl_tensor_new_full(ctx, DL_I64, 1, (int64_t[]){2}, 7);
  DL_CHECK(dl_onnx_initializer(m, "k", ids) == 0);

  DL_CHECK(dl_onnx_attr_int(m, "axis", 1) < 0);                            /* before any node */
  const char *in[] = {"x", "w"}, *out[] = {"y"}, *none[] = {""};
  DL_CHECK(dl_onnx_node(m, "Add", "n1", 2, in, 0, out) < 0);
  DL_CHECK(dl_onnx_node(m, "Add", "n1", 2, in, 1, none) < 0);
  DL_CHECK(dl_onnx_node(m, "Add", "n1", 2, in, 1, out) == 0);
  int64_t ks[] = {3, 3};
  for (int i = 0; i < 20; i++) DL_CHECK(dl_onnx_attr_int(m, "i", i) == 0);  /* grows past 8 */
  DL_CHECK(dl_onnx_attr_ints(m, "kernel_shape", 2, ks) == 0);
  DL_CHECK(dl_onnx_attr_float(m, "epsilon", 1e-5f) == 0);
  DL_CHECK(dl_onnx_write(m, path) == 0);
  DL_CHECK(dl_onnx_write(m, "/nonexistent-dir/x.onnx") < 0);
  DL_CHECK(strstr(ctx->err, "cannot write '/nonexistent-dir/x.onnx'") != NULL);
  dl_onnx_free(m);
  dl_onnx_free(NULL);

  size_t n = 0;
  uint8_t *buf = slurp(path, &n);
  DL_CHECK(buf && n > 0);
  Onnx__ModelProto *mp = buf ? onnx__model_proto__unpack(NULL, n, buf) : NULL;
  DL_CHECK(mp != NULL);
  if (mp) {
    DL_CHECK(mp->ir_version == 8 && mp->n_opset_import == 1 && mp->opset_import[0]->version == 13);
    DL_CHECK(strcmp(mp->producer_name, "dlua") == 0 && strcmp(mp->producer_version, "0.1.0") == 0);
    Onnx__GraphProto *g = mp->graph;
    DL_CHECK(g->n_input == 1 && g->n_output == 1 && g->n_node == 1 && g->n_initializer == 2);
    Onnx__TensorShapeProto *s = g->input[0]->type->tensor_type->shape;
    DL_CHECK(s->n_dim == 3 && strcmp(s->dim[0]->dim_param, "batch") == 0 && s->dim[1]->dim_value == 3);
    Onnx__TensorProto *w = g->initializer[0];
    DL_CHECK(strcmp(w->name, "w") == 0 && w->n_dims == 2 && w->dims[0] == 3 && w->dims[1] == 2);
    DL_CHECK(w->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && w->raw_data.len == 24);
    float f[6];
    memcpy(f, w->raw_data.data, sizeof f);
    const float want[6] = {0, 3, 1, 4, 2, 5};
    for (int i = 0; i < 6; i++) DL_CHECK_CLOSE(f[i], want[i], 0);
    Onnx__TensorProto *k = g->initializer[1];
    int64_t kv[2];
    memcpy(kv, k->raw_data.data, sizeof kv);
    DL_CHECK(k->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && kv[0] == 7 && kv[1] == 7);
    Onnx__NodeProto *nd = g->node[0];
    DL_CHECK(strcmp(nd->op_type, "Add") == 0 && nd->n_input == 2 && strcmp(nd->input[1], "w") == 0);
    DL_CHECK(nd->n_attribute == 22 && nd->attribute[19]->i == 19);
    DL_CHECK(nd->attribute[20]->n_ints == 2 && nd->attribute[20]->ints[1] == 3);
    DL_CHECK_CLOSE(nd->attribute[21]->f, 1e-5f, 0);
    onnx__model_proto__free_unpacked(mp, NULL);
  }
  free(buf);
  remove(path);
  dl_tensor_release(t);
  dl_tensor_release(a2);
  dl_tensor_release(a);
  dl_tensor_release(ids);
  dl_ctx_free(ctx);
  DL_TEST_END();
}

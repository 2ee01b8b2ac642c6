/* onnx.h -- writes ONNX models (a ModelProto, the official onnx.proto compiled by
 * protoc-c at build time; see CMakeLists.txt) for dl.onnx.export (lua/dlua/nn/onnx.lua).
 *
 * A model is built in order (graph inputs and outputs, initializers, nodes with their
 * attributes), then written with an atomic replace (io/fileio.c). The builder checks
 * what protobuf cannot (names non-empty, dtypes it can encode, data that is
 * contiguous); whether the graph is a valid ONNX graph is the caller's business (the
 * specs run onnx.checker.check_model on every model dl.onnx.export writes).
 *
 * Every function returns 0 (or a pointer), or -1 (NULL) with ctx->err set and the
 * builder unchanged; after a failure the builder can still be freed (and used).
 */
/* See LICENSE */
#ifndef DL_ONNX_H
#define DL_ONNX_H

#include "core/dl.h"

typedef struct dl_onnx dl_onnx;

/* A model of IR version 8 importing the default domain at opset (7..17 are accepted:
 * the IR version is 8, which the ONNX 1.12 checker reads up to opset 17). */
dl_onnx *dl_onnx_new(dl_ctx *ctx, const char *producer, const char *version, int64_t opset);
void dl_onnx_free(dl_onnx *m);                       /* NULL is a no-op */

/* A graph input (output = 0) or output (output = 1) of dtype float32, float64, int32 or
 * int64 with ndim dims; dims[i] < 0 is the symbolic dimension named dyn (e.g. "batch"). */
int dl_onnx_value(dl_onnx *m, int output, const char *name, dl_dtype dtype, int ndim,
                  const int64_t *dims, const char *dyn);

/* A constant of the graph: t's shape and elements (float32, float64, int32 or int64;
 * copied, any strides). */
int dl_onnx_initializer(dl_onnx *m, const char *name, const dl_tensor *t);

/* A node of op type op (default domain); attributes added next go to it. */
int dl_onnx_node(dl_onnx *m, const char *op, const char *name, int nin, const char *const *in,
                 int nout, const char *const *out);
int dl_onnx_attr_int(dl_onnx *m, const char *name, int64_t v);
int dl_onnx_attr_ints(dl_onnx *m, const char *name, int n, const int64_t *v);
int dl_onnx_attr_float(dl_onnx *m, const char *name, float v);

/* Serialises the model to path (atomic replace). */
int dl_onnx_write(dl_onnx *m, const char *path);

#endif

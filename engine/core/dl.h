/* dl.h -- the dlua C core: context, errors, memory, RNG, thread pool, tensors.
 *
 * One header for the core's shared types. The core has no Lua in it: every
 * fallible function returns NULL (or -1) and leaves a message in ctx->err,
 * which the binding turns into a Lua error. Ownership follows one rule: a
 * function with `new` in its name returns a new reference the caller must
 * release; everything else is borrowed.
 */
/* See LICENSE */
#ifndef DL_H
#define DL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#define DL_MAXDIM 8

typedef enum { DL_F32 = 0, DL_F64, DL_I32, DL_I64, DL_U8, DL_NDTYPES } dl_dtype;

typedef struct dl_pool dl_pool;
typedef struct dl_node dl_node;

/* What the core sees of an autograd node: the first member of every dl_node
 * (ops/ops.h). The tape sets destroy when it records the node; the core only
 * counts references and calls destroy when the last one goes, so tensors can
 * own their grad_fn without the core calling up into ops/. */
typedef struct dl_node_ref {
  atomic_int refs;
  dl_node *next_free;               /* dl_node_release's pending list */
  void (*destroy)(dl_node *n);      /* frees what the node holds, and the node */
} dl_node_ref;

/* Size-class caching allocator with accounting and an optional limit. */
typedef struct {
  pthread_mutex_t lock;
  void *free_list[64];        /* one singly linked list per power-of-two class */
  uint64_t last_alloc[64];    /* the allocs count at each class's last request */
  size_t in_use;              /* bytes handed out (rounded to class), live */
  size_t peak;                /* max of in_use */
  size_t cached;              /* bytes held in free lists */
  size_t limit;               /* 0 = none */
  uint64_t allocs;            /* dl_alloc calls */
  uint64_t system_allocs;     /* of which went to the system allocator */
  uint64_t splits;            /* of which were cut from a larger cached block */
  uint64_t frees;
  uint64_t fail_at;           /* test hook: fail the N-th allocation (0 = never) */
  int last_oom;               /* 1 if the last failure was the limit, not malloc */
  size_t external;            /* bytes of live external storages (mapped files): not in
                                 in_use, peak or limit, which count the allocator's blocks */
} dl_mem;

typedef struct dl_ctx {
  char err[512];              /* last error message */
  int oom;                    /* last error was an allocation failure */
  int grad_enabled;           /* autograd recording on/off */
  uint64_t seed;              /* default RNG key */
  uint64_t counter;           /* default RNG stream position (in 4x32 blocks) */
  dl_mem mem;
  dl_pool *pool;
  int threads;
} dl_ctx;

/* Creates a context and puts the calling thread in the engine's floating-point mode. */
dl_ctx *dl_ctx_new(void);
void dl_ctx_free(dl_ctx *ctx);
/* printf-style error into ctx->err; always returns NULL for `return dl_fail(...)` */
void *dl_fail(dl_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* On a hot loop: an AVX2 copy of the function beside the baseline one, picked at load
 * time by the CPU (the build targets x86-64-v2 so that it runs anywhere). C11 mode does not
 * contract a * b + c into FMA, so both copies give the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DL_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DL_SIMD_CLONES
#endif

/* Memory: 64-byte aligned. dl_alloc returns NULL and sets ctx->err on failure
 * (limit or system); dl_free(ctx, NULL, _) is a no-op. */
void *dl_alloc(dl_ctx *ctx, size_t nbytes);
void dl_free(dl_ctx *ctx, void *p, size_t nbytes);
void dl_mem_trim(dl_ctx *ctx);                   /* return cached blocks to the system */

/* RNG: Philox-4x32-10, counter based. Fills n values from stream (key, counter);
 * returns the counter after the values used. */
uint64_t dl_rng_uniform(uint64_t key, uint64_t counter, float *out, size_t n);
uint64_t dl_rng_normal(uint64_t key, uint64_t counter, float *out, size_t n);
void dl_philox(uint64_t key, uint64_t counter, uint32_t out[4]);

/* Floating-point mode (fpenv.c): dl_fp_enter puts the calling thread in the engine's mode,
 * subnormal floats flushed to zero (FTZ and DAZ on x86) unless DLUA_FLUSH_SUBNORMALS=0;
 * every thread that runs kernels calls it first. */
void dl_fp_enter(void);
/* 1 when the engine's threads flush subnormals (the default; DLUA_FLUSH_SUBNORMALS=0: 0) */
int dl_fp_flush(void);
/* DLUA_FLUSH_SUBNORMALS malformed? (env.h: 1 and the message, else 0) */
int dl_fp_env_error(char *msg, size_t cap);

/* Thread pool: runs fn(arg, i) for i in [0, n) over the pool's threads and the
 * caller; returns when all are done. Task i always covers the same work, so
 * results at a fixed thread count are deterministic. */
dl_pool *dl_pool_new(int threads);
void dl_pool_free(dl_pool *p);
int dl_pool_threads(const dl_pool *p);
/* how long (microseconds) a waiting thread polls before it sleeps: DLUA_POOL_SPIN_US, 0 when
 * the pool has more threads than the machine has cores */
int64_t dl_pool_spin_us(const dl_pool *p);
/* DLUA_POOL_SPIN_US malformed? (env.h: 1 and the message, else 0) */
int dl_pool_env_error(char *msg, size_t cap);
void dl_pool_run(dl_pool *p, int n, void (*fn)(void *arg, int i), void *arg);

/* --------------------------------------------------------- shape arithmetic
 *
 * The one place the core multiplies sizes (shape.c). Every shape that enters
 * the core goes through dl_shape_resolve or dl_shape_check before anything is
 * allocated or indexed, so a tensor never holds more than DL_MAX_NUMEL
 * elements: 2^48 (256 Ti elements, far past any real tensor), which keeps a
 * tensor's element count, strides, offsets and byte size (count * <= 8) well
 * inside int64. Code may then compute those from a tensor's own shape without
 * checks (dl_shape_numel, dl_shape_strides); any other count that is a product
 * (header data bytes, a batch of N examples, a dilated kernel) goes through
 * dl_shape_mul / dl_shape_add / dl_shape_bytes. All return 0, or -1 with a
 * message in ctx->err that starts with op ("view: shape [4611686018427387905,
 * 4] overflows (more than 2^48 elements)"); ctx may be NULL (no message), for
 * pipeline workers that report a failure their own way.
 */
#define DL_MAX_NUMEL ((int64_t)1 << 48)

/* Checks and resolves shape[0..ndim) in place for op. known is the element count the shape must
 * hold (view, reshape, a file's declared size) or -1 when the shape stands alone (creation,
 * headers). With known >= 0, one size may be -1 and is inferred; it is refused when the other
 * sizes multiply to 0 (ambiguous), as are two -1s. Fails on: ndim outside [0, DL_MAXDIM], a
 * negative size, a product of the non-zero sizes past DL_MAX_NUMEL (even when another size is 0,
 * so strides never overflow), a product other than known. *numel (may be NULL) gets the product. */
int dl_shape_resolve(dl_ctx *ctx, const char *op, int ndim, int64_t *shape, int64_t known, int64_t *numel);
/* dl_shape_resolve(ctx, op, ndim, copy of shape, -1, numel) for a shape that must not change. */
int dl_shape_check(dl_ctx *ctx, const char *op, int ndim, const int64_t *shape, int64_t *numel);
/* *out = a * b or a + b for counts a, b >= 0 (what names them in the message: "records x bytes");
 * fails on a negative factor or a result past DL_MAX_NUMEL. */
int dl_shape_mul(dl_ctx *ctx, const char *op, const char *what, int64_t a, int64_t b, int64_t *out);
int dl_shape_add(dl_ctx *ctx, const char *op, const char *what, int64_t a, int64_t b, int64_t *out);
/* *bytes = numel * elsize for 0 <= numel <= DL_MAX_NUMEL and elsize <= 64; fails otherwise. */
int dl_shape_bytes(dl_ctx *ctx, const char *op, int64_t numel, size_t elsize, int64_t *bytes);
/* Unchecked helpers for a shape that already passed the checks: its element count, its
 * row-major contiguous strides. */
int64_t dl_shape_numel(int ndim, const int64_t *shape);
void dl_shape_strides(int ndim, const int64_t *shape, int64_t *stride);
/* 1 if every element of the strided view (shape, stride, offset) lies in [0, limit), else 0
 * (products checked); a view with no elements always fits. */
int dl_shape_fits(int ndim, const int64_t *shape, const int64_t *stride, int64_t offset, int64_t limit);
void dl_shape_str(const int64_t *shape, int ndim, char *buf, size_t n); /* "[2, 3]", truncated to n */

/* ------------------------------------------------------------------ tensors */

typedef struct {
  atomic_int refs;
  dl_ctx *ctx;
  void *data;
  size_t nbytes;
  void (*release)(void *arg);   /* external memory: called once by the last reference instead
                                   of dl_free(data); NULL for the allocator's blocks */
  void *release_arg;
} dl_storage;

typedef struct dl_tensor {
  atomic_int refs;
  dl_storage *st;
  dl_dtype dtype;
  int ndim;
  int64_t shape[DL_MAXDIM];
  int64_t stride[DL_MAXDIM];    /* in elements */
  int64_t offset;               /* in elements */
  int requires_grad;            /* leaf flag or recorded by an op */
  struct dl_tensor *grad;       /* accumulated gradient (leaves), owned */
  dl_node *grad_fn;             /* node that produced this tensor, owned */
} dl_tensor;

size_t dl_dtype_size(dl_dtype d);
const char *dl_dtype_name(dl_dtype d);
int dl_dtype_from_name(const char *name);        /* -1 if unknown */
int dl_dtype_is_float(dl_dtype d);

int64_t dl_numel(const dl_tensor *t);
int dl_is_contiguous(const dl_tensor *t);
void *dl_data(const dl_tensor *t);               /* pointer to element 0 */
double dl_get_flat(const dl_tensor *t, int64_t i);       /* i-th element in row-major order */
int64_t dl_flat_offset(const dl_tensor *t, int64_t i);   /* its offset in elements from dl_data(t) */
void dl_set_flat(dl_tensor *t, int64_t i, double v);
double dl_load(const void *base, dl_dtype d, int64_t i); /* raw element access */
void dl_store(void *base, dl_dtype d, int64_t i, double v);

dl_tensor *dl_tensor_retain(dl_tensor *t);
/* Drops a reference; the last one frees the tensor, its grad and its reference to grad_fn
 * (dl_node_release, which calls the node's destroy set by the tape). NULL is a no-op. */
void dl_tensor_release(dl_tensor *t);
void dl_node_release(dl_node *n);                /* NULL is a no-op */

/* Creation. Fail on negative sizes, ndim > DL_MAXDIM, overflow, memory. */
dl_tensor *dl_tensor_new_empty(dl_ctx *ctx, dl_dtype d, int ndim, const int64_t *shape);
dl_tensor *dl_tensor_new_zeros(dl_ctx *ctx, dl_dtype d, int ndim, const int64_t *shape);
dl_tensor *dl_tensor_new_full(dl_ctx *ctx, dl_dtype d, int ndim, const int64_t *shape, double v);
dl_tensor *dl_tensor_new_scalar(dl_ctx *ctx, dl_dtype d, double v);
dl_tensor *dl_tensor_new_arange(dl_ctx *ctx, dl_dtype d, double start, double stop, double step);
dl_tensor *dl_tensor_new_rand(dl_ctx *ctx, dl_dtype d, int ndim, const int64_t *shape, int normal);

/* A contiguous tensor over memory the allocator does not own (a memory-mapped file): data must
 * be aligned to the dtype's size and hold nbytes >= the shape's bytes. The last reference calls
 * release(arg) instead of freeing data. The bytes are counted in ctx->mem.external, not in_use:
 * the limit and the peak keep measuring the allocator (the kernel pages a mapped file in and out
 * on its own). Fails (NULL, nothing taken: the caller still owns data) on a bad shape, a short or
 * misaligned block, or memory for the header. */
dl_tensor *dl_tensor_new_external(dl_ctx *ctx, dl_dtype d, int ndim, const int64_t *shape, void *data,
                                  size_t nbytes, void (*release)(void *arg), void *arg);

/* Views: share storage; no autograd (see ops). dl_view_new fails on a bad shape and on a view
 * that leaves t's storage; dl_view_new_reshape resolves one -1 and copies when strides forbid
 * a view. */
dl_tensor *dl_view_new(dl_ctx *ctx, dl_tensor *t, int ndim, const int64_t *shape,
                       const int64_t *stride, int64_t offset);
dl_tensor *dl_view_new_reshape(dl_ctx *ctx, dl_tensor *t, int ndim, const int64_t *shape);
/* 1 if t can be viewed as the (resolved, same element count) shape without a copy */
int dl_view_possible(const dl_tensor *t, int ndim, const int64_t *shape);

/* Copies src into dst (same numel, any strides, dtype converted). */
int dl_copy_into(dl_ctx *ctx, dl_tensor *dst, const dl_tensor *src);
dl_tensor *dl_tensor_new_contiguous(dl_ctx *ctx, dl_tensor *t, dl_dtype d);

#endif

/* dist.c -- MPI wrappers with error reporting, the fused allreduce, and the
 * world-of-one fallback (see dist.h). Without DLUA_WITH_MPI this file still
 * builds: every collective is then a local copy or a no-op. It deliberately
 * does not know about Lua, models or gradients: the bindings (lua_dist.c) and
 * dl.train decide what to reduce and when.
 */
/* See LICENSE */
#define _DEFAULT_SOURCE 1       /* on_exit, setenv */
#include "sys/dist.h"
#include "core/env.h"
#include "ops/batchnorm.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef DLUA_WITH_MPI
#include <mpi.h>
#endif
#if defined(DLUA_WITH_MPI) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK_BEFORE_FINALIZE 1
#endif

/* process-wide: MPI itself is (see the header) */
static int mpi_up;              /* 1 once we called MPI_Init */
static int mpi_rank, mpi_world = 1;
static int solo_depth;
static dl_dist_stats stats;


int dl_dist_available(void) {
#ifdef DLUA_WITH_MPI
  return 1;
#else
  return 0;
#endif
}

static int active(void) { return mpi_up && mpi_world > 1 && solo_depth == 0; }

int dl_dist_env_error(char *msg, size_t cap) { return dl_env_flag_error("DLUA_DIST", msg, cap); }

int dl_dist_rank(void) { return active() ? mpi_rank : 0; }
int dl_dist_world(void) { return active() ? mpi_world : 1; }

int dl_dist_solo(int delta) {
  solo_depth += delta;
  if (solo_depth < 0) solo_depth = 0;
  return solo_depth;
}

dl_dist_stats dl_dist_get_stats(void) { return stats; }

/* the world size a launcher announced, or 0 */
static int launched_size(void) {
  if (dl_env_flag("DLUA_DIST", 1) == 0) return 0;          /* malformed: refused at load */
  const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};     /* Open MPI; MPICH Hydra, Slurm PMI */
  for (int i = 0; vars[i]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return atoi(v) > 0 ? atoi(v) : 1;
  }
  return getenv("PMIX_RANK") || getenv("PMI_RANK") ? 1 : 0;   /* a launcher that gives no size */
}

#ifdef DLUA_WITH_MPI
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int mpi_fail(dl_ctx *ctx, const char *call, int rc) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  dl_fail(ctx, "dist: %s failed on rank %d of %d: %s", call, mpi_rank, mpi_world, msg);
  return -1;
}

/* exit status 0: MPI_Finalize; otherwise leave it to mpirun to end the job
 * (a finalize here would wait for ranks that are blocked in a collective) */
static void at_exit(int status, void *arg) {
  (void)arg;
  int fin = 0;
  MPI_Finalized(&fin);
#ifdef LEAK_CHECK_BEFORE_FINALIZE
  /* sanitizer builds: check dlua's leaks now; MPI_Finalize unloads Open MPI's plugins
   * and leaves allocations LeakSanitizer can neither attribute nor suppress */
  if (!fin && status == 0) __lsan_do_leak_check();
#endif
  if (!fin && status == 0) MPI_Finalize();
}

static MPI_Datatype mpi_type(dl_dtype d) {
  switch (d) {
  case DL_F32: return MPI_FLOAT;
  case DL_F64: return MPI_DOUBLE;
  case DL_I32: return MPI_INT32_T;
  case DL_I64: return MPI_INT64_T;
  default: return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(dl_dist_op op) {
  switch (op) {
  case DL_DIST_MAX: return MPI_MAX;
  case DL_DIST_MIN: return MPI_MIN;
  default: return MPI_SUM;
  }
}
#endif

int dl_dist_init(dl_ctx *ctx) {
  if (mpi_up) return 0;
  int n = launched_size();
  if (n == 0) return 0;
#ifdef DLUA_WITH_MPI
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
      dl_fail(ctx, "dist: MPI_Init_thread failed (error %d)", rc);
      return -1;
    }
    on_exit(at_exit, NULL);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_world);
  mpi_up = 1;
  setenv("DLUA_DIST", "0", 1);  /* processes this rank starts are not ranks */
  return 0;
#else
  if (n > 1) {
    dl_fail(ctx, "dist: started by an MPI launcher with %d ranks, but this dlua was built without MPI "
                 "(install libopenmpi-dev and rebuild; DLUA_WITH_MPI)", n);
    return -1;
  }
  return 0;
#endif
}

int dl_dist_allreduce(dl_ctx *ctx, void *buf, int64_t n, dl_dtype d, dl_dist_op op) {
  if (d != DL_F32 && d != DL_F64 && d != DL_I32 && d != DL_I64) {
    dl_fail(ctx, "dist: allreduce of %s is not supported (float32, float64, int32, int64)", dl_dtype_name(d));
    return -1;
  }
  if (op == DL_DIST_MEAN && !dl_dtype_is_float(d)) {
    dl_fail(ctx, "dist: allreduce \"mean\" needs a float tensor, got %s", dl_dtype_name(d));
    return -1;
  }
  if (!active() || n == 0) return 0;
#ifdef DLUA_WITH_MPI
  double t0 = now();
  size_t es = dl_dtype_size(d);
  char *p = buf;
  for (int64_t done = 0; done < n;) {      /* MPI counts are int */
    int64_t m = n - done < (INT_MAX / 2) ? n - done : (INT_MAX / 2);
    int rc = MPI_Allreduce(MPI_IN_PLACE, p + (size_t)done * es, (int)m, mpi_type(d), mpi_op(op), MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(ctx, "MPI_Allreduce", rc);
    done += m;
  }
  if (op == DL_DIST_MEAN) {
    if (d == DL_F32) {
      float *f = buf, w = (float)mpi_world;
      for (int64_t i = 0; i < n; i++) f[i] /= w;
    } else {
      double *f = buf, w = (double)mpi_world;
      for (int64_t i = 0; i < n; i++) f[i] /= w;
    }
  }
  stats.allreduce_seconds += now() - t0;
  stats.allreduce_calls++;
  stats.allreduce_bytes += (uint64_t)n * es;
  return 0;
#else
  (void)buf;
  return 0;
#endif
}

/* one bucket: tensors in[i0..i1) of dtype d, numel total */
static int reduce_bucket(dl_ctx *ctx, dl_tensor **out, dl_tensor *const *in, const int *idx, int cnt,
                         int64_t total, dl_dtype d, dl_dist_op op) {
  dl_tensor *buf = dl_tensor_new_empty(ctx, d, 1, &total);
  if (!buf) return -1;
  int64_t off = 0;
  int rc = 0;
  for (int k = 0; k < cnt && !rc; k++) {
    dl_tensor *t = in[idx[k]];
    int64_t stride[DL_MAXDIM], s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) { stride[i] = s; s *= t->shape[i]; }
    dl_tensor *v = dl_view_new(ctx, buf, t->ndim, t->shape, stride, off);
    if (!v || dl_copy_into(ctx, v, t) < 0) rc = -1;
    out[idx[k]] = v;
    off += dl_numel(t);
  }
  if (!rc) rc = dl_dist_allreduce(ctx, dl_data(buf), total, d, op);
  dl_tensor_release(buf);         /* the views keep the storage */
  return rc;
}

int dl_dist_allreduce_new(dl_ctx *ctx, dl_tensor **out, dl_tensor *const *in, int n, dl_dist_op op) {
  for (int i = 0; i < n; i++) out[i] = NULL;
  if (n == 0) return 0;
  int *idx = dl_alloc(ctx, sizeof(int) * (size_t)n);
  if (!idx) return -1;
  int rc = 0;
  for (int d = 0; d < DL_NDTYPES && !rc; d++) {
    int cnt = 0;
    int64_t total = 0;
    size_t es = dl_dtype_size((dl_dtype)d);
    for (int i = 0; i <= n && !rc; i++) {
      int end = i == n;
      int64_t m = end ? 0 : dl_numel(in[i]);
      if (!end && in[i]->dtype != (dl_dtype)d) continue;
      if (cnt > 0 && (end || (size_t)(total + m) * es > DL_DIST_BUCKET_BYTES)) {
        rc = reduce_bucket(ctx, out, in, idx, cnt, total, (dl_dtype)d, op);
        cnt = 0;
        total = 0;
      }
      if (!end) { idx[cnt++] = i; total += m; }
    }
  }
  dl_free(ctx, idx, sizeof(int) * (size_t)n);
  if (rc)
    for (int i = 0; i < n; i++) { dl_tensor_release(out[i]); out[i] = NULL; }
  return rc;
}

int dl_dist_broadcast(dl_ctx *ctx, void *buf, size_t nbytes, int root) {
  if (root < 0 || root >= dl_dist_world()) {
    dl_fail(ctx, "dist: broadcast root %d is not a rank (world %d)", root, dl_dist_world());
    return -1;
  }
  if (!active() || nbytes == 0) return 0;
#ifdef DLUA_WITH_MPI
  double t0 = now();
  char *p = buf;
  for (size_t done = 0; done < nbytes;) {
    size_t m = nbytes - done < (size_t)(INT_MAX / 2) ? nbytes - done : (size_t)(INT_MAX / 2);
    int rc = MPI_Bcast(p + done, (int)m, MPI_BYTE, root, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(ctx, "MPI_Bcast", rc);
    done += m;
  }
  stats.broadcast_seconds += now() - t0;
  stats.broadcast_calls++;
#else
  (void)buf;
#endif
  return 0;
}

int dl_dist_barrier(dl_ctx *ctx) {
  if (!active()) return 0;
#ifdef DLUA_WITH_MPI
  int rc = MPI_Barrier(MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return mpi_fail(ctx, "MPI_Barrier", rc);
#else
  (void)ctx;
#endif
  return 0;
}

int dl_dist_allgather(dl_ctx *ctx, const void *buf, size_t n, char **out, size_t *outn, int64_t **lens) {
  int w = dl_dist_world();
  *out = NULL;
  *lens = NULL;
  *outn = 0;
  if (n > (size_t)(INT_MAX / 2)) {
    dl_fail(ctx, "dist: allgather of %zu bytes (at most %d)", n, INT_MAX / 2);
    return -1;
  }
  int64_t *l = dl_alloc(ctx, sizeof(int64_t) * (size_t)w);
  if (!l) return -1;
  l[0] = (int64_t)n;
#ifdef DLUA_WITH_MPI
  if (active()) {
    int64_t mine = (int64_t)n;
    int rc = MPI_Allgather(&mine, 1, MPI_INT64_T, l, 1, MPI_INT64_T, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) { dl_free(ctx, l, sizeof(int64_t) * (size_t)w); return mpi_fail(ctx, "MPI_Allgather", rc); }
  }
#endif
  size_t total = 0;
  for (int r = 0; r < w; r++) total += (size_t)l[r];
  if (total > (size_t)(INT_MAX / 2)) {
    dl_free(ctx, l, sizeof(int64_t) * (size_t)w);
    dl_fail(ctx, "dist: allgather of %zu bytes in all (at most %d)", total, INT_MAX / 2);
    return -1;
  }
  char *o = dl_alloc(ctx, total + 1);
  if (!o) { dl_free(ctx, l, sizeof(int64_t) * (size_t)w); return -1; }
  if (!active()) {
    if (n) memcpy(o, buf, n);
  } else {
#ifdef DLUA_WITH_MPI
    int *cnt = dl_alloc(ctx, sizeof(int) * 2 * (size_t)w);
    if (!cnt) { dl_free(ctx, o, total + 1); dl_free(ctx, l, sizeof(int64_t) * (size_t)w); return -1; }
    int *disp = cnt + w, off = 0;
    for (int r = 0; r < w; r++) { cnt[r] = (int)l[r]; disp[r] = off; off += cnt[r]; }
    int rc = MPI_Allgatherv(buf, (int)n, MPI_BYTE, o, cnt, disp, MPI_BYTE, MPI_COMM_WORLD);
    dl_free(ctx, cnt, sizeof(int) * 2 * (size_t)w);
    if (rc != MPI_SUCCESS) {
      dl_free(ctx, o, total + 1);
      dl_free(ctx, l, sizeof(int64_t) * (size_t)w);
      return mpi_fail(ctx, "MPI_Allgatherv", rc);
    }
#endif
  }
  *out = o;
  *outn = total;
  *lens = l;
  return 0;
}

static int check_peer(dl_ctx *ctx, const char *fn, int r) {
  if (!active()) {
    dl_fail(ctx, "dist: %s needs more than one rank (world is 1)", fn);
    return -1;
  }
  if (r < 0 || r >= mpi_world || r == mpi_rank) {
    dl_fail(ctx, "dist: %s: rank %d is not another rank (this is rank %d of %d)", fn, r, mpi_rank, mpi_world);
    return -1;
  }
  return 0;
}

#define MSG_TAG 77

int dl_dist_send(dl_ctx *ctx, int dest, const void *buf, size_t n) {
  if (check_peer(ctx, "send", dest) < 0) return -1;
  if (n > (size_t)(INT_MAX / 2)) { dl_fail(ctx, "dist: send of %zu bytes (at most %d)", n, INT_MAX / 2); return -1; }
#ifdef DLUA_WITH_MPI
  int rc = MPI_Send(buf, (int)n, MPI_BYTE, dest, MSG_TAG, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return mpi_fail(ctx, "MPI_Send", rc);
#else
  (void)buf;
#endif
  return 0;
}

int dl_dist_probe(dl_ctx *ctx, int src, int *ready, size_t *len) {
  *ready = 0;
  *len = 0;
  if (check_peer(ctx, "probe", src) < 0) return -1;
#ifdef DLUA_WITH_MPI
  MPI_Status st;
  int rc = MPI_Iprobe(src, MSG_TAG, MPI_COMM_WORLD, ready, &st);
  if (rc != MPI_SUCCESS) return mpi_fail(ctx, "MPI_Iprobe", rc);
  if (*ready) {
    int c = 0;
    MPI_Get_count(&st, MPI_BYTE, &c);
    *len = (size_t)c;
  }
#endif
  return 0;
}

int dl_dist_recv(dl_ctx *ctx, int src, void *buf, size_t len) {
  if (check_peer(ctx, "recv", src) < 0) return -1;
#ifdef DLUA_WITH_MPI
  int rc = MPI_Recv(buf, (int)len, MPI_BYTE, src, MSG_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) return mpi_fail(ctx, "MPI_Recv", rc);
#else
  (void)buf;
  (void)len;
#endif
  return 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ull; }
  return h;
}

int dl_dist_checksum(dl_ctx *ctx, dl_tensor *const *ts, int n, uint64_t *out) {
  uint64_t h = 14695981039346656037ull;
  for (int i = 0; i < n; i++) {
    dl_tensor *t = ts[i];
    dl_tensor *c = dl_is_contiguous(t) ? dl_tensor_retain(t) : dl_tensor_new_contiguous(ctx, t, t->dtype);
    if (!c) return -1;
    int32_t hdr[2] = {(int32_t)t->dtype, t->ndim};
    h = fnv(h, hdr, sizeof hdr);
    h = fnv(h, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    h = fnv(h, dl_data(c), (size_t)dl_numel(c) * dl_dtype_size(c->dtype));
    dl_tensor_release(c);
  }
  *out = h;
  return 0;
}

/* ------------------------------------------------------------ batch norm */

static int bn_sum(void *ud, dl_ctx *ctx, double *buf, int64_t n) {
  (void)ud;
  return dl_dist_allreduce(ctx, buf, n, DL_F64, DL_DIST_SUM);
}

static const dl_bn_reducer bn_reducer = {bn_sum, NULL};   /* static: outlives every graph */

int dl_dist_bn_reducer(dl_ctx *ctx, const dl_bn_reducer **out) {
  *out = NULL;
  if (dl_dist_init(ctx) < 0) return -1;
  if (dl_dist_world() > 1) *out = &bn_reducer;
  return 0;
}

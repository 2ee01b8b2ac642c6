/* pipeline.c -- the threaded batch producer behind dl.data pipelines.
 *
 * Batches are numbered globally (g = epoch * batches_per_epoch + b) and live
 * in a ring of prefetch + workers slots: a worker claims the next number
 * whose slot is free, fills the slot's tensors, and marks it ready; the
 * consumer takes slot g % nslots when it holds batch g, gives its tensors to
 * the caller, allocates fresh ones (on its own thread, so workers never touch
 * the dl_ctx) and frees the slot. Claims are in order, so batches reach the
 * consumer in order whatever the scheduling, and an error in batch g is
 * raised exactly when the consumer asks for batch g.
 *
 * An epoch's plan (the order of its examples) is computed by the first
 * worker that needs it, from (seed, epoch) alone, and kept while in use.
 * Inside a batch the stages run stage by stage over all its examples, which
 * gives one trace span and one timing per stage and batch.
 *
 * Reading an example is the dataset's business (dl_dataset_read): a row of
 * its tensors, or a source's read (image files decoded here, on the worker
 * threads). A row the source skips (on_error = "skip") is left out of its
 * batch, which is then shorter (or padded, with weight 0); a batch left with
 * no example is not handed out at all, and the skips are counted. The probe
 * that learns the output fields reads its example on a thread of its own when
 * there are workers, so the consumer's thread never decodes.
 *
 * It does not retry, or reorder batches for speed.
 */
/* See LICENSE */
#include "data/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { SLOT_FREE, SLOT_BUSY, SLOT_READY, SLOT_FAILED } slot_state;

typedef struct {
  slot_state state;
  int64_t gen;                      /* batch held or being filled */
  int64_t nreal;                    /* real examples in it */
  int64_t skipped;                  /* examples of it the source skipped */
  struct {                          /* unbatched: a field whose shape differs from the first example's */
    int used;
    dl_dtype dtype;
    int ndim;
    int64_t shape[DL_MAXDIM];
    void *buf;                      /* malloc'd by the worker, copied into a tensor by the consumer */
    size_t cap;
  } var[DL_MAXFIELDS];
  char skip_msg[512];               /* why the first of them was */
  dl_tensor *t[DL_MAXFIELDS + 1];   /* one per output field, + weight */
  char err[768];
} slot;

typedef struct {
  dl_pipe *p;
  int id;
  pthread_t thread;
  int started;
  dl_example *ex;                   /* [rows per batch] */
} worker;

typedef struct {
  int64_t epoch;                    /* -1 = empty */
  int refs;
  int64_t *idx;                     /* examples of the source, in epoch order */
} plan;

struct dl_pipe {
  dl_pipe_opts o;
  dl_transform tf[DL_PIPE_MAXTF];
  int64_t epoch_examples, per_epoch, rows;   /* rows: per slot (batch, or 1) */
  uint64_t aug_key;
  /* output fields: names, dtypes, shapes of one example */
  int nout, weight;
  char names[DL_MAXFIELDS + 1][DL_NAMELEN];
  dl_dtype dtype[DL_MAXFIELDS + 1];
  int ndim[DL_MAXFIELDS + 1];
  int64_t shape[DL_MAXFIELDS + 1][DL_MAXDIM];
  size_t rowbytes[DL_MAXFIELDS + 1];
  /* the ring */
  int nslots;
  slot *slots;
  int nworkers;
  worker *w;
  pthread_mutex_t lock;
  pthread_cond_t can_fill, can_take;
  int64_t next_gen, cons_gen, end_gen, fail_gen;
  int stop, joined, dead;
  /* plans */
  pthread_mutex_t plan_lock;
  int nplans;
  plan *plans;
  /* statistics: stage times are summed by the workers, the rest by the consumer */
  _Atomic int64_t stage_ns[DL_PIPE_MAXTF + 2];
  int64_t skipped;                   /* examples skipped in the batches taken (consumer's) */
  char first_skip[512];              /* why the first was skipped */
  int64_t wait_ns, startup_ns, first_ret, last_ret, batches;
};

#define NO_FAIL INT64_MAX

dl_pipe_opts dl_pipe_defaults(void) {
  dl_pipe_opts o;
  memset(&o, 0, sizeof o);
  o.workers = 1;
  o.prefetch = 2;
  o.epochs = 1;
  return o;
}

/* ------------------------------------------------------------ plans */

int64_t dl_pipe_epoch_examples(const dl_pipe_opts *o) { return dl_order_count(o->ds, o->nindex, o->index); }

int64_t dl_pipe_epoch_batches(const dl_pipe_opts *o) {
  int64_t n = dl_pipe_epoch_examples(o);
  if (o->batch <= 0) return n;
  return o->drop_remainder ? n / o->batch : (n + o->batch - 1) / o->batch;
}

static plan *acquire_plan(dl_pipe *p, int64_t epoch) {
  pthread_mutex_lock(&p->plan_lock);
  plan *hit = NULL, *victim = NULL;
  for (int i = 0; i < p->nplans; i++) {
    plan *pl = &p->plans[i];
    if (pl->epoch == epoch) { hit = pl; break; }
    if (pl->refs == 0 && (!victim || pl->epoch < victim->epoch)) victim = pl;
  }
  if (!hit && victim) {
    int64_t *idx = dl_epoch_order(p->o.ds, p->o.nindex, p->o.index, epoch);
    if (idx) {
      free(victim->idx);
      victim->idx = idx;
      victim->epoch = epoch;
      hit = victim;
    }
  }
  if (hit) hit->refs++;
  pthread_mutex_unlock(&p->plan_lock);
  return hit;
}

static void release_plan(dl_pipe *p, plan *pl) {
  pthread_mutex_lock(&p->plan_lock);
  pl->refs--;
  pthread_mutex_unlock(&p->plan_lock);
}

/* ------------------------------------------------------------ producing */

/* the position that keys transform s (and names it): its place in the full list of maps */
static int stage_no(const dl_pipe *p, int s) { return p->tf[s].stage >= 0 ? p->tf[s].stage : s; }

static int stage_fail(const dl_pipe *p, char *dst, size_t n, int stage, const dl_example *ex, int64_t epoch,
                      const char *msg) {
  snprintf(dst, n, "pipeline: stage %d '%s' failed on example %lld (epoch %lld): %s", stage_no(p, stage) + 1, p->tf[stage].name,
           (long long)ex->index + 1, (long long)epoch + 1, msg);
  return -1;
}

static int collate_fail(char *dst, size_t n, const dl_example *ex, int64_t epoch, const char *msg) {
  snprintf(dst, n, "pipeline: batching failed on example %lld (epoch %lld): %s", (long long)ex->index + 1,
           (long long)epoch + 1, msg);
  return -1;
}

/* runs the transforms over ex[0..n) of epoch (keys from ekey); tid 0: no spans */
static int run_transforms(dl_pipe *p, int worker_id, dl_example *ex, int64_t n, int64_t epoch, uint64_t ekey,
                          char *err, size_t errlen, int tid) {
  char msg[512];
  for (int s = 0; s < p->o.ntf; s++) {
    int64_t t0 = dl_trace_now();
    for (int64_t k = 0; k < n; k++) {
      uint64_t key = dl_key_mix(dl_key_mix(ekey, (uint64_t)ex[k].id), (uint64_t)stage_no(p, s) + 1);
      msg[0] = 0;
      if (dl_transform_apply(&p->tf[s], &ex[k], worker_id, epoch, key, msg, sizeof msg) < 0)
        return stage_fail(p, err, errlen, s, &ex[k], epoch, msg);
    }
    int64_t t1 = dl_trace_now();
    atomic_fetch_add_explicit(&p->stage_ns[s + 1], t1 - t0, memory_order_relaxed);
    if (tid) dl_trace_span(p->o.trace, p->tf[s].name, "pipeline", tid, t0, t1);
  }
  return 0;
}

static int produce(dl_pipe *p, worker *w, slot *s, int64_t g) {
  int64_t epoch = g / p->per_epoch, b = g % p->per_epoch;
  int64_t first = b * p->rows, n = p->epoch_examples - first < p->rows ? p->epoch_examples - first : p->rows;
  int tid = p->o.workers == 0 ? DL_TRACE_MAIN_TID : 1000 * p->o.trace_id + w->id + 1;
  dl_trace *tr = p->o.trace && dl_trace_active(p->o.trace) ? p->o.trace : NULL;   /* once per batch */
  if (tr && p->o.workers > 0) {
    char name[48];
    snprintf(name, sizeof name, "pipeline %d worker %d", p->o.trace_id, w->id + 1);
    dl_trace_thread_name(tr, tid, name);
  }
  int64_t tb = dl_trace_now();
  plan *pl = acquire_plan(p, epoch);
  if (!pl) {
    snprintf(s->err, sizeof s->err, "pipeline: out of memory for the order of epoch %lld", (long long)epoch + 1);
    return -1;
  }
  char msg[512];
  int64_t kept = 0;
  s->skipped = 0;
  for (int64_t k = 0; k < n; k++) {
    int rc = dl_dataset_read(p->o.ds, pl->idx[first + k], &w->ex[kept], msg, sizeof msg);
    if (rc < 0) {
      release_plan(p, pl);
      snprintf(s->err, sizeof s->err, "pipeline: reading example %lld (epoch %lld) failed: %s",
               (long long)pl->idx[first + k] + 1, (long long)epoch + 1, msg);
      return -1;
    }
    if (rc == 0) {
      kept++;
      continue;
    }
    if (s->skipped++ == 0) snprintf(s->skip_msg, sizeof s->skip_msg, "%s", msg);
  }
  n = kept;                                  /* skipped rows were overwritten in place: ex[0..kept) are read */
  release_plan(p, pl);
  int64_t t1 = dl_trace_now();
  atomic_fetch_add_explicit(&p->stage_ns[0], t1 - tb, memory_order_relaxed);
  if (tr) dl_trace_span(tr, "read", "pipeline", tid, tb, t1);
  uint64_t ekey = dl_key_mix(p->aug_key, (uint64_t)epoch);
  if (run_transforms(p, w->id, w->ex, n, epoch, ekey, s->err, sizeof s->err, tr ? tid : 0) < 0) return -1;
  /* collate into the slot */
  int64_t tc = dl_trace_now();
  for (int64_t k = 0; k < n; k++) {
    const dl_example *ex = &w->ex[k];
    for (int j = 0; j < p->nout; j++) {
      int i = dl_example_find(ex, p->names[j]);
      if (i < 0) {
        snprintf(msg, sizeof msg, "field '%s' is missing (the first example had it)", p->names[j]);
        return collate_fail(s->err, sizeof s->err, ex, epoch, msg);
      }
      const dl_exfield *f = &ex->f[i];
      int differs = f->dtype != p->dtype[j] || f->ndim != p->ndim[j] ||
                    memcmp(f->shape, p->shape[j], sizeof(int64_t) * (size_t)f->ndim);
      s->var[j].used = 0;
      if (differs && p->o.batch == 0) {       /* one example per slot: any shape (images of their own sizes) */
        size_t bytes = (size_t)dl_exfield_numel(f) * dl_dtype_size(f->dtype);
        if (bytes > s->var[j].cap) {
          void *grown = realloc(s->var[j].buf, bytes);
          if (!grown) {
            snprintf(msg, sizeof msg, "out of memory for field '%s' (%zu bytes)", f->name, bytes);
            return collate_fail(s->err, sizeof s->err, ex, epoch, msg);
          }
          s->var[j].buf = grown;
          s->var[j].cap = bytes;
        }
        if (bytes) memcpy(s->var[j].buf, f->data, bytes);
        s->var[j].used = 1;
        s->var[j].dtype = f->dtype;
        s->var[j].ndim = f->ndim;
        memcpy(s->var[j].shape, f->shape, sizeof s->var[j].shape);
        continue;
      }
      if (differs) {
        char a[96], e[96];
        dl_shape_str(f->shape, f->ndim, a, sizeof a);
        dl_shape_str(p->shape[j], p->ndim[j], e, sizeof e);
        snprintf(msg, sizeof msg, "field '%s' is %s %s, the first example's was %s %s", f->name,
                 dl_dtype_name(f->dtype), a, dl_dtype_name(p->dtype[j]), e);
        return collate_fail(s->err, sizeof s->err, ex, epoch, msg);
      }
      memcpy((char *)dl_data(s->t[j]) + (size_t)k * p->rowbytes[j], f->data, p->rowbytes[j]);
    }
    if (ex->n > p->nout) {
      snprintf(msg, sizeof msg, "it has %d fields, the first example had %d", ex->n, p->nout);
      return collate_fail(s->err, sizeof s->err, ex, epoch, msg);
    }
  }
  s->nreal = n;
  if (p->weight) {
    float *wt = dl_data(s->t[p->nout]);
    for (int64_t k = 0; k < n; k++) wt[k] = 1.0f;
    if (p->o.pad && n > 0 && n < p->rows) {      /* padding: copies of real rows, weight 0 */
      for (int64_t k = n; k < p->rows; k++) {
        for (int j = 0; j < p->nout; j++) {
          char *base = dl_data(s->t[j]);
          memcpy(base + (size_t)k * p->rowbytes[j], base + (size_t)(k % n) * p->rowbytes[j], p->rowbytes[j]);
        }
        wt[k] = 0.0f;
      }
      s->nreal = p->rows;
    }
  }
  int64_t te = dl_trace_now();
  atomic_fetch_add_explicit(&p->stage_ns[p->o.ntf + 1], te - tc, memory_order_relaxed);
  if (tr) {
    dl_trace_span(tr, "collate", "pipeline", tid, tc, te);
    char name[48];
    snprintf(name, sizeof name, "batch %lld", (long long)g + 1);
    dl_trace_span(tr, name, "pipeline", tid, tb, te);
  }
  return 0;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  dl_pipe *p = w->p;
  dl_fp_enter();
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stop && p->next_gen < p->end_gen && p->fail_gen == NO_FAIL &&
           p->slots[p->next_gen % p->nslots].state != SLOT_FREE)
      pthread_cond_wait(&p->can_fill, &p->lock);
    if (p->stop || p->next_gen >= p->end_gen || p->fail_gen != NO_FAIL) break;
    int64_t g = p->next_gen++;
    slot *s = &p->slots[g % p->nslots];
    s->state = SLOT_BUSY;
    s->gen = g;
    pthread_mutex_unlock(&p->lock);
    int rc = produce(p, w, s, g);
    pthread_mutex_lock(&p->lock);
    s->state = rc < 0 ? SLOT_FAILED : SLOT_READY;
    if (rc < 0 && g < p->fail_gen) p->fail_gen = g;
    pthread_cond_broadcast(&p->can_take);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* ------------------------------------------------------------ life cycle */

static int alloc_slot_tensors(dl_ctx *ctx, dl_pipe *p, slot *s) {
  for (int j = 0; j < p->nout + p->weight; j++) {
    int64_t shape[DL_MAXDIM + 1];
    shape[0] = p->rows;
    for (int k = 0; k < p->ndim[j]; k++) shape[k + 1] = p->shape[j][k];
    s->t[j] = dl_tensor_new_empty(ctx, p->dtype[j], p->ndim[j] + 1, shape);
    if (!s->t[j]) return -1;
  }
  return 0;
}

/* the probe's example: the first the source does not skip, read and transformed into
 * p->w[0].ex[0]; runs on a thread of its own when there are workers (it may decode a file) */
typedef struct {
  dl_pipe *p;
  int rc;
  int64_t pos;                       /* the example read */
  char err[768];
} probe_job;

static void *probe_main(void *arg) {
  probe_job *j = arg;
  dl_pipe *p = j->p;
  dl_example *ex = &p->w[0].ex[0];
  char msg[512] = "";
  if (p->o.workers > 0) dl_fp_enter();
  j->rc = -1;
  for (j->pos = 0; j->pos < p->o.ds->len; j->pos++) {
    int rc = dl_dataset_read(p->o.ds, j->pos, ex, msg, sizeof msg);
    if (rc < 0) {
      snprintf(j->err, sizeof j->err, "pipeline: reading example %lld failed: %s", (long long)j->pos + 1, msg);
      return NULL;
    }
    if (rc == 0) break;
  }
  if (j->pos == p->o.ds->len) {
    snprintf(j->err, sizeof j->err, "pipeline: every one of the %lld examples was skipped (the last: %s)",
             (long long)p->o.ds->len, msg);
    return NULL;
  }
  uint64_t ekey = dl_key_mix(p->aug_key, (uint64_t)p->o.start_epoch);
  if (run_transforms(p, 0, ex, 1, p->o.start_epoch, ekey, j->err, sizeof j->err, 0) < 0) return NULL;
  j->rc = 0;
  return NULL;
}

/* runs the transforms on one example to learn the output fields */
static int probe(dl_ctx *ctx, dl_pipe *p) {
  dl_example *ex = &p->w[0].ex[0];
  probe_job job = {.p = p, .rc = -1};
  if (p->o.workers > 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, probe_main, &job) != 0) {
      dl_fail(ctx, "pipeline: cannot start the thread that reads the first example");
      return -1;
    }
    pthread_join(t, NULL);
  } else {
    probe_main(&job);
  }
  if (job.rc < 0) {
    dl_fail(ctx, "%s", job.err);
    return -1;
  }
  if (ex->n == 0) {
    dl_fail(ctx, "pipeline: the transforms leave no fields (example %lld)", (long long)job.pos + 1);
    return -1;
  }
  p->nout = ex->n;
  for (int j = 0; j < ex->n; j++) {
    const dl_exfield *f = &ex->f[j];
    if (p->weight && strcmp(f->name, "weight") == 0) {
      dl_fail(ctx, "pipeline: the examples have a field named 'weight', the name batching gives the example weights");
      return -1;
    }
    if (f->ndim + 1 > DL_MAXDIM) {
      dl_fail(ctx, "pipeline: field '%s' has %d dimensions; batching adds one and %d are supported", f->name, f->ndim,
              DL_MAXDIM);
      return -1;
    }
    /* the batch of p->rows examples of this field: [rows, shape...], checked before any slot is made */
    int64_t bshape[DL_MAXDIM], numel, rb;
    bshape[0] = p->rows;
    memcpy(bshape + 1, f->shape, sizeof(int64_t) * (size_t)f->ndim);
    if (dl_shape_check(ctx, "batch", f->ndim + 1, bshape, &numel) < 0 ||
        dl_shape_bytes(ctx, "batch", dl_exfield_numel(f), dl_dtype_size(f->dtype), &rb) < 0) {
      char m[sizeof ctx->err];
      snprintf(m, sizeof m, "%s", ctx->err);
      dl_fail(ctx, "pipeline: field '%s': %s", f->name, m);
      return -1;
    }
    snprintf(p->names[j], DL_NAMELEN, "%s", f->name);
    p->dtype[j] = f->dtype;
    p->ndim[j] = f->ndim;
    memcpy(p->shape[j], f->shape, sizeof p->shape[j]);
    p->rowbytes[j] = (size_t)rb;
  }
  if (p->weight) {
    int j = p->nout;
    snprintf(p->names[j], DL_NAMELEN, "weight");
    p->dtype[j] = DL_F32;
    p->ndim[j] = 0;
    p->rowbytes[j] = sizeof(float);
  }
  return 0;
}

dl_pipe *dl_pipe_new(dl_ctx *ctx, const dl_pipe_opts *o) {
  if (!o->ds) return dl_fail(ctx, "pipeline: no dataset");
  if (o->ntf < 0 || o->ntf > DL_PIPE_MAXTF) return dl_fail(ctx, "pipeline: %d transforms, at most %d", o->ntf, DL_PIPE_MAXTF);
  if (o->nindex < 0 || o->nindex > DL_PIPE_MAXSTAGES)
    return dl_fail(ctx, "pipeline: %d shuffle/shard stages, at most %d", o->nindex, DL_PIPE_MAXSTAGES);
  for (int i = 0; i < o->nindex; i++)
    if (o->index[i].kind == DL_IX_SHARD && (o->index[i].world < 1 || o->index[i].rank < 0 || o->index[i].rank >= o->index[i].world))
      return dl_fail(ctx, "shard: rank %lld is not in 0..%lld (world %lld)", (long long)o->index[i].rank,
                     (long long)o->index[i].world - 1, (long long)o->index[i].world);
  for (int i = 0; i < o->nindex; i++) {
    if (!o->index[i].blocks) continue;
    const char *what = o->index[i].kind == DL_IX_SHARD ? "shard{by = \"shards\"}" : "shuffle{shards = true}";
    const dl_dataset *ds = o->ds;
    if (!ds->src || ds->src->nblocks < 1 || ds->index || ds->len != ds->rows)
      return dl_fail(ctx, "%s: the dataset has no shards to work on (it needs a whole data.shards dataset, "
                     "before split or subset)", what);
    if (i > 0 && !o->index[i - 1].blocks)
      return dl_fail(ctx, "%s: comes after a shuffle or shard of examples; stages on shards come first", what);
  }
  if (o->batch < 0) return dl_fail(ctx, "batch: size must be positive, got %lld", (long long)o->batch);
  if (o->workers < 0 || o->workers > 256) return dl_fail(ctx, "workers: count must be 0 to 256, got %d", o->workers);
  if (o->prefetch < 1 || o->prefetch > 1024) return dl_fail(ctx, "prefetch: depth must be 1 to 1024, got %d", o->prefetch);
  if (o->start_epoch < 0 || o->start_batch < 0) return dl_fail(ctx, "pipeline: negative start position");
  dl_pipe *p = calloc(1, sizeof *p);
  if (!p) {
    ctx->oom = 1;
    return dl_fail(ctx, "pipeline: out of memory");
  }
  p->o = *o;
  if (o->ntf) memcpy(p->tf, o->tf, (size_t)o->ntf * sizeof *p->tf);
  p->o.tf = p->tf;
  dl_dataset_retain(o->ds);
  pthread_mutex_init(&p->lock, NULL);
  pthread_mutex_init(&p->plan_lock, NULL);
  pthread_cond_init(&p->can_fill, NULL);
  pthread_cond_init(&p->can_take, NULL);
  p->fail_gen = NO_FAIL;
  p->joined = 1;
  p->epoch_examples = dl_pipe_epoch_examples(o);
  p->per_epoch = dl_pipe_epoch_batches(o);
  p->rows = o->batch > 0 ? o->batch : 1;
  p->weight = o->batch > 0;
  p->aug_key = dl_key_mix(dl_key_mix(o->seed, 0x6175670000000000ull), (uint64_t)o->rank);
  if (p->per_epoch > 0 && o->start_batch > p->per_epoch) {
    dl_fail(ctx, "pipeline: start batch %lld is past the %lld batches of an epoch", (long long)o->start_batch,
            (long long)p->per_epoch);
    goto fail;
  }
  int64_t start, end_epoch, end = 0;
  if (dl_shape_mul(ctx, "pipeline", "start epoch x batches per epoch", o->start_epoch, p->per_epoch, &start) < 0 ||
      dl_shape_add(ctx, "pipeline", "start batch", start, o->start_batch, &start) < 0 ||
      (o->epochs >= 0 && (dl_shape_add(ctx, "pipeline", "start epoch + epochs", o->start_epoch, o->epochs, &end_epoch) < 0 ||
                          dl_shape_mul(ctx, "pipeline", "epochs x batches per epoch", end_epoch, p->per_epoch, &end) < 0)))
    goto fail;
  p->next_gen = p->cons_gen = start;
  p->end_gen = p->per_epoch == 0 ? start : o->epochs < 0 ? NO_FAIL - 1 : end;
  if (p->end_gen < start) p->end_gen = start;
  p->nworkers = o->workers > 0 ? o->workers : 1;
  p->nslots = o->workers > 0 ? o->prefetch + o->workers : 1;
  p->nplans = p->nworkers + 2;
  p->w = calloc((size_t)p->nworkers, sizeof *p->w);
  p->slots = calloc((size_t)p->nslots, sizeof *p->slots);
  p->plans = calloc((size_t)p->nplans, sizeof *p->plans);
  if (!p->w || !p->slots || !p->plans) goto oom;
  for (int i = 0; i < p->nplans; i++) p->plans[i].epoch = -1;
  for (int i = 0; i < p->nworkers; i++) {
    p->w[i].p = p;
    p->w[i].id = i;
    p->w[i].ex = calloc((size_t)p->rows, sizeof *p->w[i].ex);
    if (!p->w[i].ex) goto oom;
  }
  if (p->o.ds->len == 0 || p->cons_gen >= p->end_gen) return p;   /* nothing to produce */
  if (probe(ctx, p) < 0) goto fail;
  for (int i = 0; i < p->nslots; i++)
    if (alloc_slot_tensors(ctx, p, &p->slots[i]) < 0) goto fail;
  p->joined = 0;
  if (o->workers > 0) {
    for (int i = 0; i < p->nworkers; i++) {
      if (pthread_create(&p->w[i].thread, NULL, worker_main, &p->w[i]) != 0) {
        dl_fail(ctx, "pipeline: cannot start worker thread %d of %d", i + 1, p->nworkers);
        goto fail;
      }
      p->w[i].started = 1;
    }
  }
  return p;
oom:
  ctx->oom = 1;
  dl_fail(ctx, "pipeline: out of memory");
fail:
  dl_pipe_free(p);
  return NULL;
}

void dl_pipe_stop(dl_pipe *p) {
  if (!p || p->joined) return;
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_broadcast(&p->can_fill);
  pthread_mutex_unlock(&p->lock);
  for (int i = 0; i < p->nworkers; i++)
    if (p->w[i].started) {
      pthread_join(p->w[i].thread, NULL);
      p->w[i].started = 0;
    }
  p->joined = 1;
}

void dl_pipe_free(dl_pipe *p) {
  if (!p) return;
  p->joined = 0;                      /* join whatever was started */
  dl_pipe_stop(p);
  for (int i = 0; p->slots && i < p->nslots; i++) {
    for (int j = 0; j < DL_MAXFIELDS + 1; j++) dl_tensor_release(p->slots[i].t[j]);
    for (int j = 0; j < DL_MAXFIELDS; j++) free(p->slots[i].var[j].buf);
  }
  for (int i = 0; p->w && i < p->nworkers; i++) {
    for (int64_t k = 0; p->w[i].ex && k < p->rows; k++) dl_example_free(&p->w[i].ex[k]);
    free(p->w[i].ex);
  }
  for (int i = 0; p->plans && i < p->nplans; i++) free(p->plans[i].idx);
  free(p->plans);
  free(p->slots);
  free(p->w);
  dl_dataset_release(p->o.ds);
  pthread_mutex_destroy(&p->lock);
  pthread_mutex_destroy(&p->plan_lock);
  pthread_cond_destroy(&p->can_fill);
  pthread_cond_destroy(&p->can_take);
  free(p);
}

/* ------------------------------------------------------------ consuming */

void dl_batch_release(dl_batch *b) {
  for (int i = 0; i < b->n; i++) dl_tensor_release(b->t[i]);
  b->n = 0;
}

static dl_tensor *hand_out(dl_ctx *ctx, const dl_pipe *p, const slot *s, int j) {
  dl_tensor *t = s->t[j];
  int64_t nreal = s->nreal;
  if (p->o.batch == 0 && j < DL_MAXFIELDS && s->var[j].used) {   /* an example of its own shape */
    dl_tensor *o = dl_tensor_new_empty(ctx, s->var[j].dtype, s->var[j].ndim, s->var[j].shape);
    if (o) memcpy(o->st->data, s->var[j].buf, (size_t)dl_numel(o) * dl_dtype_size(o->dtype));
    return o;
  }
  if (p->o.batch == 0)                          /* one example: drop the batch dimension */
    return dl_view_new(ctx, t, t->ndim - 1, t->shape + 1, t->stride + 1, t->offset);
  int64_t shape[DL_MAXDIM];
  memcpy(shape, t->shape, sizeof shape);
  shape[0] = nreal;
  return dl_view_new(ctx, t, t->ndim, shape, t->stride, t->offset);
}

/* gives slot s back to the workers and moves on to the next batch; counts its skips */
static void free_slot(dl_pipe *p, slot *s) {
  if (s->skipped > 0 && p->skipped == 0) snprintf(p->first_skip, sizeof p->first_skip, "%s", s->skip_msg);
  p->skipped += s->skipped;
  s->skipped = 0;
  pthread_mutex_lock(&p->lock);
  s->state = SLOT_FREE;
  p->cons_gen++;
  pthread_cond_broadcast(&p->can_fill);
  pthread_mutex_unlock(&p->lock);
}

int dl_pipe_next(dl_ctx *ctx, dl_pipe *p, dl_batch *out) {
  memset(out, 0, sizeof *out);
  if (p->dead) {
    dl_fail(ctx, "pipeline: stopped after an earlier error");
    return -1;
  }
  int64_t t0 = dl_trace_now(), t1, empty = 0;
  slot *s;
  for (;;) {                                   /* batches whose every example was skipped are passed over */
    int64_t g = p->cons_gen;
    if (g >= p->end_gen) return 0;
    if (empty > 0 && empty >= p->per_epoch) {  /* a whole epoch of nothing: an endless pipeline would spin */
      dl_fail(ctx, "pipeline: no example of a whole epoch (%lld batches, up to epoch %lld) could be read; the "
              "first skipped: %s", (long long)p->per_epoch, (long long)(g / p->per_epoch), p->first_skip);
      p->dead = 1;
      dl_pipe_stop(p);
      return -1;
    }
    s = &p->slots[g % p->nslots];
    if (p->o.workers == 0) {
      s->gen = g;
      s->state = produce(p, &p->w[0], s, g) < 0 ? SLOT_FAILED : SLOT_READY;
    } else {
      pthread_mutex_lock(&p->lock);
      while (!((s->state == SLOT_READY || s->state == SLOT_FAILED) && s->gen == g))
        pthread_cond_wait(&p->can_take, &p->lock);
      pthread_mutex_unlock(&p->lock);
    }
    if (s->state == SLOT_FAILED || s->nreal > 0) break;
    free_slot(p, s);
    empty++;
  }
  int64_t g = p->cons_gen;
  t1 = dl_trace_now();
  if (p->o.trace) dl_trace_span(p->o.trace, "wait for input", "pipeline", DL_TRACE_MAIN_TID, t0, t1);
  if (s->state == SLOT_FAILED) {
    dl_fail(ctx, "%s", s->err);
    p->dead = 1;
    dl_pipe_stop(p);
    return -1;
  }
  out->epoch = g / p->per_epoch;
  out->batch = g % p->per_epoch;
  for (int j = 0; j < p->nout + p->weight; j++) {
    out->names[j] = p->names[j];
    out->t[j] = hand_out(ctx, p, s, j);
    if (!out->t[j]) goto oom;
    out->n = j + 1;
  }
  for (int j = 0; j < p->nout + p->weight; j++) {   /* the caller's now: fresh buffers for the slot */
    dl_tensor_release(s->t[j]);
    s->t[j] = NULL;
  }
  if (alloc_slot_tensors(ctx, p, s) < 0) goto oom;
  free_slot(p, s);
  int64_t t2 = dl_trace_now();
  if (p->batches == 0) {
    p->startup_ns = t1 - t0;
    p->first_ret = t2;
  } else {
    p->wait_ns += t1 - t0;
  }
  p->last_ret = t2;
  p->batches++;
  return 1;
oom:
  dl_batch_release(out);
  p->dead = 1;
  dl_pipe_stop(p);
  return -1;
}

void dl_pipe_position(const dl_pipe *p, int64_t *epoch, int64_t *batch) {
  if (p->per_epoch == 0) {
    *epoch = p->o.start_epoch;
    *batch = 0;
    return;
  }
  *epoch = p->cons_gen / p->per_epoch;
  *batch = p->cons_gen % p->per_epoch;
}

void dl_pipe_get_stats(const dl_pipe *p, dl_pipe_stats *s) {
  memset(s, 0, sizeof *s);
  s->batches = p->batches;
  s->wait_s = 1e-9 * (double)p->wait_ns;
  s->startup_s = 1e-9 * (double)p->startup_ns;
  s->span_s = p->batches > 1 ? 1e-9 * (double)(p->last_ret - p->first_ret) : 0.0;
  s->nstages = p->o.ntf + 2;
  s->stage[0] = "read";
  for (int i = 0; i < p->o.ntf; i++) s->stage[i + 1] = p->tf[i].name;
  s->stage[p->o.ntf + 1] = "collate";
  for (int i = 0; i < s->nstages; i++)
    s->stage_s[i] = 1e-9 * (double)atomic_load_explicit(&p->stage_ns[i], memory_order_relaxed);
  s->workers = p->o.workers;
  s->prefetch = p->o.prefetch;
  s->skipped = p->skipped;
  if (s->skipped > 0) snprintf(s->first_skip, sizeof s->first_skip, "%s", p->first_skip);
}

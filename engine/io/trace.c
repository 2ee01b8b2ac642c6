/* trace.c -- records spans from any thread and writes them as Chrome
 * trace-event JSON (the format chrome://tracing and Perfetto open).
 *
 * Spans are stored complete, under one mutex, in a growing array (capped at
 * DL_TRACE_MAX spans; the excess is counted and reported in the file's
 * otherData). At write time each span becomes a "B" and an "E" event and the
 * events are sorted by time; ties put ends before begins, inner ends before
 * outer ends and outer begins before inner begins, so nested spans on one
 * thread stay matched. It does not sample or aggregate. The file is written
 * through the file I/O module's atomic replace, so it is complete JSON (the old
 * document or the new one) whenever the process ends; dl_trace_flush writes
 * what was recorded so far without stopping (at the start, an empty trace).
 */
/* See LICENSE */
#include "io/trace.h"

#include "core/dl.h"
#include "io/fileio.h"
#include "io/json.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DL_TRACE_MAX (4L << 20)
#define NAME_LEN 48
#define CAT_LEN 16
#define MAX_THREADS 256

typedef struct {
  char name[NAME_LEN];
  char cat[CAT_LEN];
  int tid;
  int64_t b, e;                 /* ns since the start */
  long seq;                     /* recording order */
} span;

typedef struct {
  int tid;
  char name[NAME_LEN];
} thread_name;

struct dl_trace {
  pthread_mutex_t lock;
  int active;
  int64_t t0;                   /* dl_trace_now() at start */
  span *spans;
  long n, cap, dropped;
  thread_name threads[MAX_THREADS];
  int nthreads;
};

int64_t dl_trace_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

dl_trace *dl_trace_new(void) {
  dl_trace *tr = calloc(1, sizeof *tr);
  if (!tr) return NULL;
  pthread_mutex_init(&tr->lock, NULL);
  return tr;
}

void dl_trace_free(dl_trace *tr) {
  if (!tr) return;
  pthread_mutex_destroy(&tr->lock);
  free(tr->spans);
  free(tr);
}

void dl_trace_start(dl_trace *tr) {
  pthread_mutex_lock(&tr->lock);
  tr->n = 0;
  tr->dropped = 0;
  tr->nthreads = 0;
  tr->t0 = dl_trace_now();
  tr->active = 1;
  pthread_mutex_unlock(&tr->lock);
}

int dl_trace_active(dl_trace *tr) {
  pthread_mutex_lock(&tr->lock);
  int a = tr->active;
  pthread_mutex_unlock(&tr->lock);
  return a;
}

static void copy_name(char *dst, size_t n, const char *src) {
  snprintf(dst, n, "%s", src ? src : "");
}

void dl_trace_span(dl_trace *tr, const char *name, const char *cat, int tid, int64_t begin_ns, int64_t end_ns) {
  if (!tr) return;
  pthread_mutex_lock(&tr->lock);
  if (!tr->active) goto out;
  if (tr->n == tr->cap) {
    long cap = tr->cap ? tr->cap * 2 : 1024;
    span *s = cap <= DL_TRACE_MAX ? realloc(tr->spans, (size_t)cap * sizeof *s) : NULL;
    if (!s) {
      tr->dropped++;
      goto out;
    }
    tr->spans = s;
    tr->cap = cap;
  }
  span *s = &tr->spans[tr->n];
  copy_name(s->name, sizeof s->name, name);
  copy_name(s->cat, sizeof s->cat, cat);
  s->tid = tid;
  s->b = begin_ns - tr->t0;
  if (s->b < 0) s->b = 0;        /* began before the recording did */
  s->e = end_ns - tr->t0;
  if (s->e <= s->b) s->e = s->b + 1;
  s->seq = tr->n++;
out:
  pthread_mutex_unlock(&tr->lock);
}

void dl_trace_thread_name(dl_trace *tr, int tid, const char *name) {
  if (!tr) return;
  pthread_mutex_lock(&tr->lock);
  int i = 0;
  while (i < tr->nthreads && tr->threads[i].tid != tid) i++;
  if (i < MAX_THREADS) {
    if (i == tr->nthreads) tr->nthreads++;
    tr->threads[i].tid = tid;
    copy_name(tr->threads[i].name, sizeof tr->threads[i].name, name);
  }
  pthread_mutex_unlock(&tr->lock);
}

/* ------------------------------------------------------------ writing */

typedef struct {
  int64_t t;                    /* time of the event */
  int end;                      /* 0 = B, 1 = E */
  int64_t other;                /* E: the span's begin; B: the span's end */
  long seq;
  const span *s;
} event;

/* time, then ends before begins; among ends the later begin (inner) first,
 * then the earlier recorded (a child completes before its parent); among
 * begins the later end (outer) first, then the later recorded (the parent) */
static int event_cmp(const void *pa, const void *pb) {
  const event *a = pa, *b = pb;
  if (a->t != b->t) return a->t < b->t ? -1 : 1;
  if (a->end != b->end) return a->end ? -1 : 1;
  if (a->other != b->other) return (a->other > b->other) ? -1 : 1;
  if (a->seq != b->seq) return a->end ? (a->seq < b->seq ? -1 : 1) : (a->seq > b->seq ? -1 : 1);
  return 0;
}

/* dl_json_string's sink: a FILE */
static void file_put(void *f, const char *s, size_t n) { fwrite(s, 1, n, f); }

static void put_json_string(FILE *f, const char *s) { dl_json_string(file_put, f, s, strlen(s)); }

/* renders spans and thread names as the JSON document; a malloc'ed buffer, or NULL */
static char *render(const span *spans, long n, long dropped, const thread_name *threads, int nthreads,
                    size_t *len) {
  event *ev = n ? malloc((size_t)n * 2 * sizeof *ev) : NULL;
  if (n && !ev) return NULL;
  for (long i = 0; i < n; i++) {
    ev[2 * i] = (event){spans[i].b, 0, spans[i].e, spans[i].seq, &spans[i]};
    ev[2 * i + 1] = (event){spans[i].e, 1, spans[i].b, spans[i].seq, &spans[i]};
  }
  if (n) qsort(ev, (size_t)n * 2, sizeof *ev, event_cmp);
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  if (!f) {
    free(ev);
    return NULL;
  }
  int pid = (int)getpid();
  fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"dlua\",\"dropped_spans\":%ld},\n", dropped);
  fprintf(f, "\"traceEvents\":[\n");
  int first = 1;
  for (int i = 0; i < nthreads; i++) {
    fprintf(f, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", first ? "" : ",\n",
            pid, threads[i].tid);
    put_json_string(f, threads[i].name);
    fprintf(f, "}}");
    first = 0;
  }
  for (long i = 0; i < 2 * n; i++) {
    const span *s = ev[i].s;
    fprintf(f, "%s{\"name\":", first ? "" : ",\n");
    put_json_string(f, s->name);
    fprintf(f, ",\"cat\":");
    put_json_string(f, s->cat[0] ? s->cat : "dlua");
    fprintf(f, ",\"ph\":\"%s\",\"ts\":%lld.%03lld,\"pid\":%d,\"tid\":%d}", ev[i].end ? "E" : "B",
            (long long)(ev[i].t / 1000), (long long)(ev[i].t % 1000), pid, s->tid);
    first = 0;
  }
  fprintf(f, "\n]}\n");
  int bad = ferror(f);
  if (fclose(f) != 0) bad = 1;
  free(ev);
  if (bad) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* renders what was recorded (stop = 1: and stops, handing the spans over)
 * and replaces path with it through the file I/O module */
static long write_file(dl_trace *tr, const char *path, int stop, char *err, size_t errlen) {
  pthread_mutex_lock(&tr->lock);
  long n = tr->n, dropped = tr->dropped;
  span *spans;
  if (stop) {
    tr->active = 0;
    spans = tr->spans;
    tr->spans = NULL;
    tr->n = tr->cap = 0;
  } else {
    spans = n ? malloc((size_t)n * sizeof *spans) : NULL;
    if (n && !spans) {
      pthread_mutex_unlock(&tr->lock);
      snprintf(err, errlen, "trace: out of memory copying %ld spans", n);
      return -1;
    }
    if (n) memcpy(spans, tr->spans, (size_t)n * sizeof *spans);
  }
  thread_name threads[MAX_THREADS];
  int nthreads = tr->nthreads;
  memcpy(threads, tr->threads, sizeof threads);
  pthread_mutex_unlock(&tr->lock);

  long rc = -1;
  size_t len = 0;
  char *buf = render(spans, n, dropped, threads, nthreads, &len);
  dl_ctx *ctx = buf ? dl_ctx_new() : NULL;
  if (!buf || !ctx) {
    snprintf(err, errlen, "trace: out of memory writing %ld spans", n);
  } else if (dl_fileio_replace(ctx, path, buf, len) < 0) {
    snprintf(err, errlen, "trace: %s", ctx->err);
  } else {
    rc = n;
  }
  dl_ctx_free(ctx);
  free(buf);
  free(spans);
  return rc;
}

long dl_trace_write_stop(dl_trace *tr, const char *path, char *err, size_t errlen) {
  return write_file(tr, path, 1, err, errlen);
}

long dl_trace_flush(dl_trace *tr, const char *path, char *err, size_t errlen) {
  return write_file(tr, path, 0, err, errlen);
}

void dl_trace_discard(dl_trace *tr) {
  pthread_mutex_lock(&tr->lock);
  tr->active = 0;
  tr->n = 0;
  tr->dropped = 0;
  pthread_mutex_unlock(&tr->lock);
}

/* pool.c -- a small fixed thread pool for data-parallel loops in the core.
 *
 * dl_pool_run(p, n, fn, arg) runs fn(arg, i) for every task i in [0, n): the
 * caller takes tasks too, workers pull the next index from an atomic counter.
 * Tasks, not threads, own the work, so a kernel that splits its range into n
 * fixed chunks computes the same result whatever the scheduling. Not
 * reentrant: one run at a time per pool (the core calls it from one thread).
 */
/* See LICENSE */
#include "dl.h"

#include <stdlib.h>

struct dl_pool {
  int nthreads;                 /* workers + the caller */
  pthread_t *tid;
  pthread_mutex_t lock;
  pthread_cond_t work, done;
  uint64_t generation;          /* bumped for each run */
  int stop;
  void (*fn)(void *, int);
  void *arg;
  int n;
  atomic_int next;              /* next task index */
  int active;                   /* workers still inside the current run */
};

static void run_tasks(dl_pool *p) {
  for (;;) {
    int i = atomic_fetch_add(&p->next, 1);
    if (i >= p->n) break;
    p->fn(p->arg, i);
  }
}

static void *worker(void *arg) {
  dl_pool *p = arg;
  uint64_t seen = 0;
  dl_fp_enter();
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->work, &p->lock);
    if (p->stop) break;
    seen = p->generation;
    pthread_mutex_unlock(&p->lock);
    run_tasks(p);
    pthread_mutex_lock(&p->lock);
    if (--p->active == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

dl_pool *dl_pool_new(int threads) {
  if (threads < 1) threads = 1;
  dl_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->tid = calloc((size_t)threads, sizeof *p->tid);
  if (!p->tid) { free(p); return NULL; }
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->done, NULL);
  p->nthreads = 1;
  for (int i = 0; i < threads - 1; i++) {
    if (pthread_create(&p->tid[i], NULL, worker, p) != 0) break;
    p->nthreads++;
  }
  return p;
}

void dl_pool_free(dl_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
  for (int i = 0; i < p->nthreads - 1; i++) pthread_join(p->tid[i], NULL);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->work);
  pthread_cond_destroy(&p->done);
  free(p->tid);
  free(p);
}

int dl_pool_threads(const dl_pool *p) { return p ? p->nthreads : 1; }

void dl_pool_run(dl_pool *p, int n, void (*fn)(void *, int), void *arg) {
  if (!p || p->nthreads == 1 || n <= 1) {
    for (int i = 0; i < n; i++) fn(arg, i);
    return;
  }
  pthread_mutex_lock(&p->lock);
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  atomic_store(&p->next, 0);
  p->active = p->nthreads - 1;
  p->generation++;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
  run_tasks(p);
  pthread_mutex_lock(&p->lock);
  while (p->active > 0) pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

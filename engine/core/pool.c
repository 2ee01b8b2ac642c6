/* pool.c -- a small fixed thread pool for data-parallel loops in the core.
 *
 * dl_pool_run(p, n, fn, arg) runs fn(arg, i) for every task i in [0, n): the
 * caller takes tasks too, workers pull the next index from an atomic counter.
 * Tasks, not threads, own the work, so a kernel that splits its range into n
 * fixed chunks computes the same result whatever the scheduling. Not
 * reentrant: one run at a time per pool (the core calls it from one thread).
 *
 * A training step is tens of runs separated by microseconds of serial work.
 * Waking a sleeping thread costs tens of microseconds on a virtual machine, so
 * between runs the workers, and the caller waiting for them, first poll for a
 * while (DLUA_POOL_SPIN_US, default 1000 microseconds; 0 never polls) and only
 * then sleep on a condition variable. The poll is long because the waits that
 * matter are: the two halves of a product can end hundreds of microseconds
 * apart, and each step has a serial stretch of about 100 us (the loss and the
 * start of the backward pass). With a 50 us poll those waits slept, and the
 * MLP trained 8-12% slower (OpenMP runtimes poll for a similar time).
 * Between checks a polling thread yields its core (sched_yield), so another
 * job's threads that are ready to run, or the input pipeline's, get it at
 * once: two 2-thread trainings sharing 2 cores lost 15% to a 1 ms poll that
 * did not yield, and none to this one. The poll is bounded: a worker idle
 * for longer sleeps, and it shrinks while polls keep timing out (poll_until).
 * A pool with more threads than the machine has cores never polls (as OpenMP
 * runtimes throttle theirs): a polling thread would hold the core that the
 * thread it waits for needs.
 */
/* See LICENSE */
#include "core/dl.h"
#include "core/env.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

struct dl_pool {
  int nthreads;                 /* workers + the caller */
  pthread_t *tid;
  pthread_mutex_t lock;
  pthread_cond_t work, done;
  _Atomic uint64_t generation;  /* bumped for each run, after its fields are set */
  int stop;                     /* under lock */
  int sleepers;                 /* workers in pthread_cond_wait (under lock) */
  int caller_sleeps;            /* the caller is in pthread_cond_wait (under lock) */
  int64_t spin_ns;              /* the longest poll before sleeping */
  int64_t caller_budget;        /* the caller's current poll (poll_until) */
  void (*fn)(void *, int);
  void *arg;
  int n;
  atomic_int next;              /* next task index */
  atomic_int active;            /* workers still inside the current run */
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define SPIN_DEFAULT_US 1000
#define SPIN_MAX_US 1000000
#define SPIN_FLOOR_NS 2000

/* polls until done(p, v) or *budget ns have passed; returns whether done. The budget
 * adapts: a poll that succeeds doubles it (up to spin_ns), one that times out halves it
 * (down to 2 us). On a machine whose cores other jobs keep busy, the thread waited for is
 * often not running, polls time out and the waiter soon sleeps at once, as without polling */
static int poll_until(dl_pool *p, int64_t *budget, int (*done)(dl_pool *, uint64_t), uint64_t v) {
  if (p->spin_ns <= 0) return done(p, v);
  int64_t t0 = now_ns();
  for (;;) {
    for (int i = 0; i < 32; i++) {
      if (done(p, v)) {
        *budget = *budget * 2 < p->spin_ns ? *budget * 2 : p->spin_ns;
        return 1;
      }
      cpu_relax();
    }
    if (now_ns() - t0 > *budget) break;
    sched_yield();
  }
  int64_t floor = p->spin_ns < SPIN_FLOOR_NS ? p->spin_ns : SPIN_FLOOR_NS;
  *budget = *budget / 2 > floor ? *budget / 2 : floor;
  return done(p, v);
}

static int new_run(dl_pool *p, uint64_t seen) {
  return atomic_load_explicit(&p->generation, memory_order_acquire) != seen;
}

static int all_done(dl_pool *p, uint64_t unused) {
  (void)unused;
  return atomic_load_explicit(&p->active, memory_order_acquire) == 0;
}

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
  int64_t budget = p->spin_ns;
  dl_fp_enter();
  for (;;) {
    if (!poll_until(p, &budget, new_run, seen)) {
      pthread_mutex_lock(&p->lock);
      p->sleepers++;
      while (!p->stop && !new_run(p, seen)) pthread_cond_wait(&p->work, &p->lock);
      p->sleepers--;
      int stop = p->stop;
      pthread_mutex_unlock(&p->lock);
      if (stop) break;
    }
    seen = atomic_load_explicit(&p->generation, memory_order_acquire);
    if (seen == UINT64_MAX) break;                 /* dl_pool_free's stop run */
    run_tasks(p);
    if (atomic_fetch_sub_explicit(&p->active, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&p->lock);
      if (p->caller_sleeps) pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->lock);
    }
  }
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
  atomic_init(&p->generation, 0);
  atomic_init(&p->next, 0);
  atomic_init(&p->active, 0);
  long us = dl_env_long("DLUA_POOL_SPIN_US", 0, SPIN_MAX_US, SPIN_DEFAULT_US);
  if (us < 0) us = SPIN_DEFAULT_US;        /* malformed: the Lua module refuses it (dl_pool_env_error) */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  p->spin_ns = cores > 0 && threads > cores ? 0 : (int64_t)us * 1000;
  p->caller_budget = p->spin_ns;
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
  atomic_store_explicit(&p->generation, UINT64_MAX, memory_order_release);   /* wakes pollers too */
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

int64_t dl_pool_spin_us(const dl_pool *p) { return p ? p->spin_ns / 1000 : 0; }

int dl_pool_env_error(char *msg, size_t cap) {
  return dl_env_long_error("DLUA_POOL_SPIN_US", 0, SPIN_MAX_US, msg, cap);
}

void dl_pool_run(dl_pool *p, int n, void (*fn)(void *, int), void *arg) {
  if (!p || p->nthreads == 1 || n <= 1) {
    for (int i = 0; i < n; i++) fn(arg, i);
    return;
  }
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  atomic_store_explicit(&p->next, 0, memory_order_relaxed);
  atomic_store_explicit(&p->active, p->nthreads - 1, memory_order_relaxed);
  /* publishes the fields above; a worker that went to sleep before this store is
   * woken below, one that checks after it sees the new generation */
  atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
  pthread_mutex_lock(&p->lock);
  if (p->sleepers) pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
  run_tasks(p);
  if (poll_until(p, &p->caller_budget, all_done, 0)) return;
  pthread_mutex_lock(&p->lock);
  p->caller_sleeps = 1;
  while (!all_done(p, 0)) pthread_cond_wait(&p->done, &p->lock);
  p->caller_sleeps = 0;
  pthread_mutex_unlock(&p->lock);
}

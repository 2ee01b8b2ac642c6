/* mem.c -- the size-class caching allocator behind every tensor storage.
 *
 * Requests are rounded up to a power-of-two class (minimum 64 bytes) and
 * 64-byte aligned. Freed blocks go to a per-class free list and are reused,
 * so a steady-state training step performs no system allocation. Accounting
 * (in use, peak, counts) is exact in class bytes; a limit makes allocations
 * past it fail with a message giving requested / in use / limit. Thread safe:
 * pipeline workers allocate too. It does not return memory to the system
 * except through dl_mem_trim (or when an allocation would otherwise fail).
 *
 * Blocks of 1 MiB and more are pages of their own (mmap), so any aligned part
 * of one can be given back alone. A request of such a class whose list is
 * empty takes the smallest larger cached block and splits it in halves down to
 * its class, the other halves going to their lists, before it asks the system:
 * memory a program touched once (the float copy of a data set made while
 * loading it, a layer's one-off buffer) serves later requests of other sizes
 * instead of staying resident beside them. No block is ever merged back, so a
 * block is cut only from a class idle for longer than the request's own class
 * (no request of it since this class's last one): two classes that a training
 * step uses in turn do not cut each other's blocks step after step, each
 * split then costing the other class a new block.
 */
/* See LICENSE */
#define _DEFAULT_SOURCE 1       /* MAP_ANONYMOUS under a strict -std */
#include "core/dl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE_CLASS 20                 /* classes from 1 MiB up are mmap'd and split */

static int size_class(size_t n) {
  int c = 6;                          /* 64 bytes */
  while (((size_t)1 << c) < n && c < 63) c++;
  return c;
}

static void fmt_bytes(char *buf, size_t n, size_t b) {
  if (b >= ((size_t)1 << 30)) snprintf(buf, n, "%zu bytes (%.2f GiB)", b, (double)b / (1 << 30));
  else if (b >= ((size_t)1 << 20)) snprintf(buf, n, "%zu bytes (%.2f MiB)", b, (double)b / (1 << 20));
  else snprintf(buf, n, "%zu bytes", b);
}

static void *system_alloc(int c) {
  if (c < PAGE_CLASS) return aligned_alloc(64, (size_t)1 << c);
  void *p = mmap(NULL, (size_t)1 << c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void system_free(void *p, int c) {
  if (c < PAGE_CLASS) free(p);
  else munmap(p, (size_t)1 << c);
}

static void trim_locked(dl_mem *m) {
  for (int c = 0; c < 64; c++) {
    while (m->free_list[c]) {
      void *p = m->free_list[c];
      m->free_list[c] = *(void **)p;
      system_free(p, c);
      m->cached -= (size_t)1 << c;
    }
  }
}

/* a block of class c (>= PAGE_CLASS) cut from the smallest larger cached one of a class idle
 * since c's last request (any class, for c's first), or NULL: of a block of class d, the
 * first 2^c bytes are returned and the halves [2^k, 2^(k+1)) for k = c .. d-1 join list k */
static void *split_locked(dl_mem *m, int c) {
  uint64_t since = m->last_alloc[c] ? m->last_alloc[c] : m->allocs;
  int d = c + 1;
  while (d < 64 && !(m->free_list[d] && m->last_alloc[d] < since)) d++;
  if (d == 64) return NULL;
  char *p = m->free_list[d];
  m->free_list[d] = *(void **)p;
  for (int k = c; k < d; k++) {
    void *h = p + ((size_t)1 << k);
    *(void **)h = m->free_list[k];
    m->free_list[k] = h;
  }
  m->cached -= (size_t)1 << c;
  m->splits++;
  return p;
}

void *dl_alloc(dl_ctx *ctx, size_t nbytes) {
  dl_mem *m = &ctx->mem;
  if (nbytes > ((size_t)1 << 46)) {
    ctx->oom = 1;
    dl_fail(ctx, "out of memory: requested %zu bytes, more than the allocator supports", nbytes);
    return NULL;
  }
  int c = size_class(nbytes ? nbytes : 1);
  size_t cb = (size_t)1 << c;
  pthread_mutex_lock(&m->lock);
  m->allocs++;
  if (m->fail_at && m->allocs == m->fail_at) {
    pthread_mutex_unlock(&m->lock);
    ctx->oom = 1;
    dl_fail(ctx, "out of memory: injected failure at allocation %llu",
            (unsigned long long)m->fail_at);
    return NULL;
  }
  if (m->limit && m->in_use + cb > m->limit) {
    size_t in_use = m->in_use, limit = m->limit;
    pthread_mutex_unlock(&m->lock);
    char r[64], u[64], l[64];
    fmt_bytes(r, sizeof r, nbytes);
    fmt_bytes(u, sizeof u, in_use);
    fmt_bytes(l, sizeof l, limit);
    ctx->oom = 1;
    dl_fail(ctx, "out of memory: requested %s, in use %s, limit %s", r, u, l);
    return NULL;
  }
  void *p = m->free_list[c];
  if (p) {
    m->free_list[c] = *(void **)p;
    m->cached -= cb;
  } else if (!(c >= PAGE_CLASS && (p = split_locked(m, c)))) {
    m->system_allocs++;
    p = system_alloc(c);
    if (!p && m->cached) {            /* give the cache back and retry once */
      trim_locked(m);
      p = system_alloc(c);
    }
    if (!p) {
      pthread_mutex_unlock(&m->lock);
      ctx->oom = 1;
      char r[64];
      fmt_bytes(r, sizeof r, nbytes);
      dl_fail(ctx, "out of memory: system allocation of %s failed", r);
      return NULL;
    }
  }
  m->last_alloc[c] = m->allocs;
  m->in_use += cb;
  if (m->in_use > m->peak) m->peak = m->in_use;
  pthread_mutex_unlock(&m->lock);
  return p;
}

void dl_free(dl_ctx *ctx, void *p, size_t nbytes) {
  if (!p) return;
  dl_mem *m = &ctx->mem;
  int c = size_class(nbytes ? nbytes : 1);
  pthread_mutex_lock(&m->lock);
  m->frees++;
  m->in_use -= (size_t)1 << c;
  *(void **)p = m->free_list[c];
  m->free_list[c] = p;
  m->cached += (size_t)1 << c;
  pthread_mutex_unlock(&m->lock);
}

void dl_mem_trim(dl_ctx *ctx) {
  pthread_mutex_lock(&ctx->mem.lock);
  trim_locked(&ctx->mem);
  pthread_mutex_unlock(&ctx->mem.lock);
}

void *dl_fail(dl_ctx *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
  va_end(ap);
  return NULL;
}

dl_ctx *dl_ctx_new(void) {
  dl_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return NULL;
  dl_fp_enter();
  pthread_mutex_init(&ctx->mem.lock, NULL);
  ctx->grad_enabled = 1;
  ctx->seed = 0;
  ctx->threads = 1;
  ctx->pool = dl_pool_new(1);
  return ctx;
}

void dl_ctx_free(dl_ctx *ctx) {
  if (!ctx) return;
  dl_pool_free(ctx->pool);
  dl_mem_trim(ctx);
  pthread_mutex_destroy(&ctx->mem.lock);
  free(ctx);
}

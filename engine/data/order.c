/* order.c -- the order of an epoch's examples: the pipeline's index stages
 * (shuffles, windowed shuffles, shards, and their forms on a source's blocks)
 * applied in turn to the dataset's positions, from keys that depend only on the
 * seeds, the stage and the epoch (order.h).
 */
/* See LICENSE */
#include "data/order.h"

#include <stdlib.h>
#include <string.h>

uint64_t dl_key_mix(uint64_t a, uint64_t b) {
  uint32_t r[4];
  dl_philox(a, b, r);
  return (uint64_t)r[0] << 32 | r[1];
}

int64_t dl_order_count(const dl_dataset *ds, int nindex, const dl_index_stage *index) {
  int64_t n = ds ? ds->len : 0;
  for (int i = 0; i < nindex; i++) {
    const dl_index_stage *st = &index[i];
    if (st->kind != DL_IX_SHARD) continue;
    if (st->blocks && ds && ds->src && ds->src->nblocks > 0) {   /* the rows of the blocks kept */
      const dl_source *src = ds->src;
      n = 0;
      for (int64_t b = st->rank; b < src->nblocks; b += st->world) n += src->block_start[b + 1] - src->block_start[b];
    } else {
      n = n > st->rank ? (n - st->rank - 1) / st->world + 1 : 0;
    }
  }
  return n;
}

/* a stage on blocks: permutes (shuffle) or filters (shard) the block list bl[0..*nbl) and
 * writes their rows, in order, into idx; returns the new number of positions */
static int64_t block_stage(const dl_source *src, const dl_index_stage *st, uint64_t key, int64_t *bl, int64_t *nbl,
                           int64_t *idx) {
  if (st->kind == DL_IX_SHARD) {
    int64_t m = 0;
    for (int64_t i = 0; i < *nbl; i++)
      if (bl[i] % st->world == st->rank) bl[m++] = bl[i];
    *nbl = m;
  } else {
    for (int64_t i = *nbl - 1; i > 0; i--) {
      int64_t j = (int64_t)(dl_key_mix(key, (uint64_t)i) % (uint64_t)(i + 1));
      int64_t t = bl[i];
      bl[i] = bl[j];
      bl[j] = t;
    }
  }
  int64_t n = 0;
  for (int64_t i = 0; i < *nbl; i++)
    for (int64_t r = src->block_start[bl[i]]; r < src->block_start[bl[i] + 1]; r++) idx[n++] = r;
  return n;
}

int64_t *dl_epoch_order(const dl_dataset *ds, int nindex, const dl_index_stage *index, int64_t epoch) {
  int64_t n = ds->len;
  int64_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx), *tmp = NULL, *bl = NULL, nbl = 0;
  if (!idx) return NULL;
  for (int64_t i = 0; i < n; i++) idx[i] = i;
  for (int s = 0; s < nindex; s++) {
    const dl_index_stage *st = &index[s];
    if (st->blocks) {                                     /* dl_pipe_new checked: the stages before are too */
      const dl_source *src = ds->src;
      if (!bl) {
        bl = malloc((size_t)src->nblocks * sizeof *bl);
        if (!bl) {
          free(idx);
          return NULL;
        }
        nbl = src->nblocks;
        for (int64_t b = 0; b < nbl; b++) bl[b] = b;
      }
      n = block_stage(src, st, dl_key_mix(dl_key_mix(st->seed, 0x626c6f636b000000ull + (uint64_t)s), (uint64_t)epoch), bl, &nbl, idx);
      continue;
    }
    if (st->kind == DL_IX_SHARD) {
      int64_t m = 0;
      for (int64_t i = st->rank; i < n; i += st->world) idx[m++] = idx[i];
      n = m;
      continue;
    }
    uint64_t key = dl_key_mix(dl_key_mix(st->seed, 0x7368756666000000ull + (uint64_t)s), (uint64_t)epoch);
    if (st->window <= 0 || st->window >= n) {             /* Fisher-Yates */
      for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(dl_key_mix(key, (uint64_t)i) % (uint64_t)(i + 1));
        int64_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
      }
      continue;
    }
    /* windowed: a buffer of `window` examples; each output is a random pick
     * from it, replaced by the next input (tf.data's shuffle buffer) */
    if (!tmp) tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp) {
      free(idx);
      return NULL;
    }
    memcpy(tmp, idx, (size_t)n * sizeof *tmp);
    int64_t w = st->window, next = w, fill = w;
    int64_t *buf = tmp;                                   /* buf = tmp[0..fill) */
    for (int64_t k = 0; k < n; k++) {
      int64_t j = (int64_t)(dl_key_mix(key, (uint64_t)k) % (uint64_t)fill);
      idx[k] = buf[j];
      if (next < n) buf[j] = tmp[next++];
      else buf[j] = buf[--fill];
    }
  }
  free(tmp);
  free(bl);
  return idx;
}


/* transforms.h -- the built-in per-example transforms the pipeline's workers
 * apply. Random draws are keyed by the caller (pipeline.h says how), never by
 * the thread that runs them.
 */
/* See LICENSE */
#ifndef DL_TRANSFORMS_H
#define DL_TRANSFORMS_H

#include "data/dataset.h"
#include "data/resize.h"

#define DL_MAXCH 64                  /* channels of normalize */

/* ------------------------------------------------------------ transforms */

typedef enum {
  DL_TF_CAST,          /* dtype */
  DL_TF_SCALE,         /* float32 x * scale */
  DL_TF_NORMALIZE,     /* float32 (x - mean[c]) / std[c]; nch 1 = all channels */
  DL_TF_CROP,          /* random crop size[] after padding by `padding` (fill) */
  DL_TF_FLIP,          /* mirror with probability p_h (horizontal) / p_v (vertical) */
  DL_TF_TRANSLATE,     /* random integer shift within +-max_shift[] (fill) */
  DL_TF_AFFINE,        /* random rotation (+-degrees), scale, translation; bilinear */
  DL_TF_ONE_HOT,       /* 1-based integer label -> float32 [classes] */
  DL_TF_SELECT,        /* keep only the named fields */
  DL_TF_CALL,          /* a callback (the binding's Lua functions) */
  DL_TF_RESIZE,        /* resample to size[] (size[1] == 0: shorter side size[0]); interp, antialias */
  DL_TF_RESIZED_CROP,  /* random window of area scale_lo..hi and ratio_lo..hi, resampled to size[] */
  DL_TF_CENTER_CROP,   /* centre window of size[], zero padding where the image is smaller */
  DL_TF_COLOR_JITTER,  /* brightness, contrast, saturation, hue factors in jitter[] (those on), random order */
  DL_TF_NKINDS
} dl_tf_kind;

/* The name of each kind (the `kind` of the Lua descriptions) and whether it draws random numbers. */
const char *dl_transform_kind_name(dl_tf_kind kind);
/* The kind named name, or -1. */
int dl_transform_kind(const char *name);

struct dl_transform;
/* A callback transform: rewrite ex for (epoch, key); worker is 0..workers-1
 * (0 on the consumer thread when there are none). Returns 0, or -1 with a
 * message in err. Called from worker threads: must not touch a dl_ctx that
 * other threads use. */
typedef int (*dl_tf_call)(const struct dl_transform *tf, int worker, dl_example *ex, int64_t epoch, uint64_t key,
                          char *err, size_t errlen);

typedef struct dl_transform {
  dl_tf_kind kind;
  char name[48];                     /* for messages, statistics and traces */
  char field[DL_NAMELEN];            /* the field it rewrites */
  dl_dtype dtype;                    /* cast */
  float scale;                       /* scale */
  int nch;                           /* normalize */
  float mean[DL_MAXCH], std[DL_MAXCH];
  int64_t size[2];                   /* crop: out height, width */
  int64_t padding;                   /* crop */
  float fill;                        /* crop, translate, affine: value outside the image */
  float p_h, p_v;                    /* flip */
  int64_t max_shift[2];              /* translate: rows, columns */
  float degrees;                     /* affine: rotation in [-degrees, degrees] */
  float translate;                   /* affine: shift up to this fraction of the size */
  float scale_lo, scale_hi;          /* affine: zoom factor range; resized crop: area fraction range */
  double ratio_lo, ratio_hi;         /* resized crop: aspect ratio (w / h) range */
  dl_interp interp;                  /* resize, resized crop */
  int antialias;                     /* resize, resized crop: bilinear downsampling filters */
  int jitter_on[4];                  /* colour jitter: brightness, contrast, saturation, hue applied? */
  double jitter[4][2];               /* colour jitter: their factor ranges [lo, hi] */
  int64_t classes;                   /* one-hot */
  int nsel;                          /* select */
  char sel[DL_MAXFIELDS][DL_NAMELEN];
  dl_tf_call call;                   /* call */
  void *user;
  int user_index;
  int stage;                         /* 0-based position among the maps that keys its draws
                                      * (and numbers it in messages); -1: its index here */
} dl_transform;

/* A transform of the kind on field with the documented defaults (scale 1,
 * padding 0, fill 0, p 0.5 horizontal, scale range 1..1, ...). */
dl_transform dl_transform_defaults(dl_tf_kind kind, const char *field);
/* Applies tf to ex; key seeds its random draws. Returns 0, or -1 with a
 * message in err (missing field, wrong shape or dtype, label out of range). */
int dl_transform_apply(const dl_transform *tf, dl_example *ex, int worker, int64_t epoch, uint64_t key, char *err,
                       size_t errlen);

#endif

/* csv.h -- CSV and CSV.gz reader for numeric tables. */
/* See LICENSE */
#ifndef DL_CSV_H
#define DL_CSV_H

#include "core/dl.h"

typedef struct {
  char delimiter;               /* ',' by default */
  int header;                   /* 1: the first line names the columns */
  int has_missing;              /* 1: empty fields become `missing` */
  double missing;
} dl_csv_opts;

dl_csv_opts dl_csv_defaults(void);

/* the first value of a column that an integer dtype cannot hold exactly */
typedef struct {
  long line;                    /* 1-based line, 0: every value fits */
  int nonint;                   /* 1: not an integer, 0: out of the dtype's range */
  char text[40];                /* the value as written (cut to 39 bytes) */
} dl_csv_bad;

#define DL_CSV_NINT 3           /* the integer dtypes checked: int32, int64, uint8 */

typedef struct {
  int ncols;
  char **names;                 /* ncols names: the header's, or "1", "2", ... */
  int *integral;                /* 1 if every value of the column was written as an integer */
  dl_csv_bad *bad;              /* [ncols][DL_CSV_NINT] */
  dl_tensor *values;            /* float64 [rows, ncols], owned */
} dl_csv;

/* Reads path (gzip-compressed or plain; zlib streams both) into out. Every
 * value must parse as a number; fields may be quoted ("1,5" is one field,
 * "" an escaped quote). Empty lines are skipped. Fails (-1, out untouched)
 * with a message naming the file and the 1-based line (and column) on: open
 * errors, decompression errors, a row with the wrong number of fields, a
 * value that is not a number, an empty value without has_missing, an empty
 * file, memory. */
int dl_csv_read(dl_ctx *ctx, const char *path, const dl_csv_opts *o, dl_csv *out);
void dl_csv_free(dl_csv *c);    /* releases what dl_csv_read filled; idempotent */
/* Why column col (0-based) cannot be stored as dtype d, naming the file, line, column and value
 * ("csv: 'a.csv' line 3, column 'id' (1): 2147483648 is out of range for int32"), written into
 * buf; NULL when every value fits exactly (always for float dtypes). */
const char *dl_csv_dtype_problem(const dl_csv *c, const char *path, int col, dl_dtype d, char *buf, size_t n);

#endif

/* csv.h -- the one CSV tokenizer: numeric tables from CSV and CSV.gz files (with columns
 * of class names turned into 1-based classes), and CSV text split into rows of strings. */
/* See LICENSE */
#ifndef DL_CSV_H
#define DL_CSV_H

#include "core/dl.h"

/* A column of names ("setosa") read as classes: named by the header (name) or by its 1-based
 * number (name NULL); field is what the caller calls it, for messages. */
typedef struct {
  const char *field;
  const char *name;
  int number;
} dl_csv_text;

#define DL_CSV_MAXTEXT 64

typedef struct {
  char delimiter;               /* ',' by default */
  int header;                   /* 1: the first line names the columns */
  int has_missing;              /* 1: empty fields become `missing` */
  double missing;
  int ntext;                    /* columns of class names, 0 to DL_CSV_MAXTEXT */
  const dl_csv_text *text;      /* [ntext], borrowed for the call */
} dl_csv_opts;

dl_csv_opts dl_csv_defaults(void);

/* the first value of a column that an integer dtype cannot hold exactly */
typedef struct {
  long line;                    /* 1-based line, 0: every value fits */
  int nonint;                   /* 1: not an integer, 0: out of the dtype's range */
  char text[40];                /* the value as written (cut to 39 bytes) */
} dl_csv_bad;

#define DL_CSV_NCHECK 4         /* the dtypes whose range is checked: int32, int64, uint8, float32 */

typedef struct {
  int ncols;
  char **names;                 /* ncols names: the header's, or "1", "2", ... */
  int *integral;                /* 1 if every value of the column was written as an integer */
  dl_csv_bad *bad;              /* [ncols][DL_CSV_NCHECK] */
  dl_tensor *values;            /* float64 [rows, ncols], owned */
  int *text_col;                /* [ntext] 0-based column of each opts.text entry */
  char ***vocab;                /* [ntext] the sorted unique names of that column, NULL-terminated */
  int ntext;
} dl_csv;

/* Reads path (gzip-compressed or plain; zlib streams both) into out. Every
 * value must parse as a number; fields may be quoted ("1,5" is one field,
 * "" an escaped quote). Empty lines are skipped. The columns of o->text hold
 * names instead: each value becomes the 1-based position of its name in the
 * column's sorted vocabulary (out->vocab). Fails (-1, out untouched) with a
 * message naming the file and the 1-based line (and column) on: open errors,
 * decompression errors, a row with the wrong number of fields, a value that
 * is not a number, an empty value without has_missing, an empty class name,
 * a text column the file does not have, an empty file, memory. */
int dl_csv_read(dl_ctx *ctx, const char *path, const dl_csv_opts *o, dl_csv *out);
void dl_csv_free(dl_csv *c);    /* releases what dl_csv_read filled; idempotent */

/* CSV text (n bytes, RFC 4180: a quoted field may hold delimiters, newlines and "" for a
 * quote; \r\n ends a line too) split into records of fields, nothing trimmed: record r has
 * (*counts)[r] fields, the strings (*fields)[(*starts)[r] + k], each NUL-terminated inside
 * *buf. An empty line is a record of one empty field; text ending without a newline ends
 * its last record. Returns the number of records, -1 out of memory (ctx->err says so; the
 * outputs untouched). The caller frees *buf, *fields, *starts and *counts. */
int64_t dl_csv_split_text(dl_ctx *ctx, const char *text, size_t n, char delim, char **buf, char ***fields,
                          int64_t **starts, int **counts);
/* Why column col (0-based) cannot be stored as dtype d, naming the file, line, column and value
 * ("csv: 'a.csv' line 3, column 'id' (1): 2147483648 is out of range for int32"), written into
 * buf; NULL when every value fits exactly (integer dtypes), or within range (float32: a finite
 * value beyond it would become an infinity; float64 always). */
const char *dl_csv_dtype_problem(const dl_csv *c, const char *path, int col, dl_dtype d, char *buf, size_t n);

#endif

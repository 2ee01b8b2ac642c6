/* csv.c -- the one CSV tokenizer: numeric tables (plain or gzip) into one float64
 * matrix, and CSV text into rows of strings (the tracking files).
 *
 * Lines are read with gzgets into a growing buffer, split on the delimiter by
 * split_record (RFC 4180 quotes; a quoted newline only in text, where records
 * may span lines), and every field is parsed with strtod. The result is a
 * [rows, columns] float64 tensor plus, per column, whether all its values were
 * written as integers, which the Lua side uses to pick int32 or float32, and the
 * first value each integer dtype could not hold (dl_csv_dtype_problem), so a
 * column stored as int32 never saturates 2147483648 to 2147483647 in silence.
 * Columns named as text hold class names: each becomes its 1-based position in
 * the column's sorted vocabulary. Typing, grouping columns into fields and
 * 0-based labels are the Lua side's business (data.csv).
 */
/* See LICENSE */
#include "io/csv.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

dl_csv_opts dl_csv_defaults(void) {
  dl_csv_opts o = {',', 1, 0, 0.0, 0, NULL};
  return o;
}

void dl_csv_free(dl_csv *c) {
  if (!c) return;
  if (c->names)
    for (int i = 0; i < c->ncols; i++) free(c->names[i]);
  free(c->names);
  free(c->integral);
  free(c->bad);
  if (c->vocab)
    for (int k = 0; k < c->ntext; k++) {
      for (char **v = c->vocab[k]; v && *v; v++) free(*v);
      free(c->vocab[k]);
    }
  free(c->vocab);
  free(c->text_col);
  dl_tensor_release(c->values);
  memset(c, 0, sizeof *c);
}

typedef struct {
  gzFile f;
  char *line;
  size_t cap;
  long lineno;
} reader;

/* next line without its end-of-line; 1, 0 at the end, -1 on a zlib error, -2 out of memory */
static int next_line(reader *r, size_t *len) {
  size_t n = 0;
  for (;;) {
    if (r->cap - n < 2) {
      size_t cap = r->cap ? r->cap * 2 : 4096;
      char *p = realloc(r->line, cap);
      if (!p) return -2;
      r->line = p;
      r->cap = cap;
    }
    if (!gzgets(r->f, r->line + n, (int)(r->cap - n > (1u << 30) ? (1u << 30) : r->cap - n))) {
      int errnum;
      gzerror(r->f, &errnum);
      if (errnum != Z_OK && errnum != Z_STREAM_END) return -1;
      if (n == 0) return 0;
      break;
    }
    n += strlen(r->line + n);
    if (n > 0 && r->line[n - 1] == '\n') break;
    if (gzeof(r->f)) break;
  }
  r->lineno++;
  while (n > 0 && (r->line[n - 1] == '\n' || r->line[n - 1] == '\r')) n--;
  r->line[n] = 0;
  *len = n;
  return 1;
}

/* Splits the record at *pp (it ends at an unquoted '\n' or at end, where *end is a writable
 * byte) into fields, unquoting in place: "" is a quote, and a quoted field may hold the
 * delimiter and newlines; what follows a closing quote up to the delimiter is dropped. Each
 * field's 0 is written over the byte after it, a \r before the newline dropped; with trim,
 * blanks before and after a field are dropped too. *pp moves past the record's newline.
 * Returns the number of fields, -1 out of memory. */
static int split_record(char **pp, char *end, char delim, int trim, char ***fields, int *cap) {
  int n = 0;
  char *p = *pp;
  for (;;) {
    if (n == *cap) {
      int c = *cap ? *cap * 2 : 16;
      char **f = realloc(*fields, (size_t)c * sizeof *f);
      if (!f) return -1;
      *fields = f;
      *cap = c;
    }
    if (trim)
      while (p < end && (*p == ' ' || *p == '\t')) p++;
    char *start = p, *w;
    if (p < end && *p == '"') {
      w = start;
      for (p++; p < end;) {
        if (*p == '"' && p + 1 < end && p[1] == '"') { *w++ = '"'; p += 2; continue; }
        if (*p == '"') { p++; break; }
        *w++ = *p++;
      }
      while (p < end && *p != delim && *p != '\n') p++;
    } else {
      while (p < end && *p != delim && *p != '\n') p++;
      w = p;
      if (w > start && w[-1] == '\r' && (p == end || *p == '\n')) w--;
    }
    if (trim)
      while (w > start && (w[-1] == ' ' || w[-1] == '\t')) w--;
    int more = p < end && *p == delim;
    if (p < end) p++;
    *w = 0;                                 /* w is at most the delimiter or newline passed */
    (*fields)[n++] = start;
    if (!more) break;
  }
  *pp = p;
  return n;
}

/* one line of a numeric table (no newline in it) split into trimmed fields */
static int split(char *line, size_t len, char delim, char ***fields, int *cap) {
  return split_record(&line, line + len, delim, 1, fields, cap);
}

int64_t dl_csv_split_text(dl_ctx *ctx, const char *text, size_t n, char delim, char **buf, char ***fields,
                          int64_t **starts, int **counts) {
  char *b = malloc(n + 1), **all = NULL, **rec = NULL;
  int64_t *st = NULL, nrec = 0, capr = 0, nall = 0, capall = 0;
  int *cn = NULL, rcap = 0;
  if (!b) goto oom;
  memcpy(b, text, n);
  b[n] = 0;
  for (char *p = b; p < b + n;) {
    int k = split_record(&p, b + n, delim, 0, &rec, &rcap);
    if (k < 0) goto oom;
    if (nrec == capr) {
      capr = capr ? capr * 2 : 64;
      int64_t *s2 = realloc(st, (size_t)capr * sizeof *s2);
      if (!s2) goto oom;
      st = s2;
      int *c2 = realloc(cn, (size_t)capr * sizeof *c2);
      if (!c2) goto oom;
      cn = c2;
    }
    if (nall + k > capall) {
      while (nall + k > capall) capall = capall ? capall * 2 : 256;
      char **a2 = realloc(all, (size_t)capall * sizeof *a2);
      if (!a2) goto oom;
      all = a2;
    }
    st[nrec] = nall;
    cn[nrec++] = k;
    memcpy(all + nall, rec, (size_t)k * sizeof *rec);
    nall += k;
  }
  free(rec);
  *buf = b;
  *fields = all;
  *starts = st;
  *counts = cn;
  return nrec;
oom:
  free(b);
  free(all);
  free(rec);
  free(st);
  free(cn);
  ctx->oom = 1;
  dl_fail(ctx, "csv: out of memory splitting %zu bytes of text", n);
  return -1;
}

static int blank(const char *s) {
  for (; *s; s++)
    if (*s != ' ' && *s != '\t') return 0;
  return 1;
}

static const dl_dtype checked_dtypes[DL_CSV_NCHECK] = {DL_I32, DL_I64, DL_U8, DL_F32};

/* 1 if dtype k of checked_dtypes holds v: an integer dtype exactly (values are read as float64,
 * so int64 takes those up to 2^53, where float64 still tells integers apart), float32 within
 * its range (inf and nan as written) */
static int fits(double v, int k) {
  if (checked_dtypes[k] == DL_F32) return !isfinite(v) || fabs(v) <= (double)FLT_MAX;
  if (!(v == floor(v))) return 0;                        /* also NaN and infinities */
  switch (k) {
    case 0: return v >= -2147483648.0 && v <= 2147483647.0;
    case 1: return fabs(v) <= 9007199254740992.0;
    default: return v >= 0 && v <= 255;
  }
}

static void note_bad(dl_csv *c, int col, long line, double v, const char *text) {
  for (int k = 0; k < DL_CSV_NCHECK; k++) {
    dl_csv_bad *b = &c->bad[col * DL_CSV_NCHECK + k];
    if (b->line || fits(v, k)) continue;
    b->line = line;
    b->nonint = checked_dtypes[k] != DL_F32 && !(v == floor(v));
    snprintf(b->text, sizeof b->text, "%s", text);
  }
}

const char *dl_csv_dtype_problem(const dl_csv *c, const char *path, int col, dl_dtype d, char *buf, size_t n) {
  for (int k = 0; k < DL_CSV_NCHECK; k++) {
    const dl_csv_bad *b = &c->bad[col * DL_CSV_NCHECK + k];
    if (checked_dtypes[k] != d || !b->line) continue;
    snprintf(buf, n, "csv: '%s' line %ld, column '%s' (%d): %s %s %s%s", path, b->line, c->names[col], col + 1, b->text,
             b->nonint ? "is not an integer, as" : "is out of range for", dl_dtype_name(d),
             d == DL_I64 && !b->nonint ? " read from CSV (values are read as float64, exact up to 2^53)"
             : d == DL_F32 ? "; a \"float64\" entry in types keeps it" : "");
    return buf;
  }
  return NULL;
}

/* strtod reads hexadecimal ("0x10"); a CSV number is decimal */
static int hex(const char *s) {
  if (*s == '+' || *s == '-') s++;
  return s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

static int written_as_integer(const char *s) {
  if (*s == '+' || *s == '-') s++;
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

/* ------------------------------------------------------------ columns of class names */

/* the names of the text columns, row by row: name[row * ntext + k], and each row's line */
typedef struct {
  char **name;
  long *line;
  int64_t rows, cap;
} text_names;

static void names_free(text_names *t, int ntext) {
  for (int64_t i = 0; i < t->rows * ntext; i++) free(t->name[i]);
  free(t->name);
  free(t->line);
  memset(t, 0, sizeof *t);
}

/* k when column col is text column k, else -1 */
static int text_index(const dl_csv *c, int col) {
  for (int k = 0; k < c->ntext; k++)
    if (c->text_col[k] == col) return k;
  return -1;
}

/* resolves o->text against the columns read (c->names); fails naming the columns there are */
static int text_columns(dl_ctx *ctx, const char *path, const dl_csv_opts *o, dl_csv *c) {
  if (o->ntext <= 0) return 0;
  c->text_col = malloc((size_t)o->ntext * sizeof *c->text_col);
  c->vocab = calloc((size_t)o->ntext, sizeof *c->vocab);
  if (!c->text_col || !c->vocab) {
    ctx->oom = 1;
    dl_fail(ctx, "csv: out of memory reading '%s'", path);
    return -1;
  }
  c->ntext = o->ntext;
  for (int k = 0; k < o->ntext; k++) {
    const dl_csv_text *x = &o->text[k];
    int col = -1;
    for (int i = 0; i < c->ncols && x->name; i++)
      if (strcmp(c->names[i], x->name) == 0) col = i;
    if (!x->name && x->number >= 1 && x->number <= c->ncols) col = x->number - 1;
    c->text_col[k] = col;
    if (col >= 0) continue;
    char list[512] = "", num[16];
    size_t used = 0;
    for (int i = 0; i < c->ncols && used < sizeof list; i++)
      used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", c->names[i]);
    snprintf(num, sizeof num, "%d", x->number);
    dl_fail(ctx, "csv: field '%s' names column '%s', which '%s' does not have (columns: %s)", x->field,
            x->name ? x->name : num, path, list);
    return -1;
  }
  return 0;
}

/* keeps the names of one row's text columns (copies) */
static int keep_names(text_names *t, int ntext, char **fields, const int *cols, long line) {
  if (t->rows == t->cap) {
    int64_t cap = t->cap ? t->cap * 2 : 256;
    char **n = realloc(t->name, (size_t)(cap * ntext) * sizeof *n);
    if (!n) return -1;
    t->name = n;
    long *l = realloc(t->line, (size_t)cap * sizeof *l);
    if (!l) return -1;
    t->line = l;
    t->cap = cap;
  }
  for (int k = 0; k < ntext; k++) {
    char *s = strdup(fields[cols[k]]);
    for (int j = 0; j < k && !s; j++) free(t->name[t->rows * ntext + j]);
    if (!s) return -1;
    t->name[t->rows * ntext + k] = s;
  }
  t->line[t->rows++] = line;
  return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* each text column's vocabulary (its sorted unique names) in c->vocab, and in vals each row's
 * 1-based position of its name there */
static int classes(dl_csv *c, const text_names *t, double *vals) {
  char **sorted = malloc((size_t)(t->rows ? t->rows : 1) * sizeof *sorted);
  if (!sorted) return -1;
  for (int k = 0; k < c->ntext; k++) {
    int64_t n = 0;
    for (int64_t r = 0; r < t->rows; r++) sorted[r] = t->name[r * c->ntext + k];
    qsort(sorted, (size_t)t->rows, sizeof *sorted, by_name);
    for (int64_t r = 0; r < t->rows; r++)
      if (n == 0 || strcmp(sorted[n - 1], sorted[r]) != 0) sorted[n++] = sorted[r];
    c->vocab[k] = calloc((size_t)n + 1, sizeof **c->vocab);
    if (!c->vocab[k]) goto oom;
    for (int64_t j = 0; j < n; j++)
      if (!(c->vocab[k][j] = strdup(sorted[j]))) goto oom;
    int col = c->text_col[k];
    for (int64_t r = 0; r < t->rows; r++) {
      char *name = t->name[r * c->ntext + k];
      char **at = bsearch(&name, c->vocab[k], (size_t)n, sizeof *at, by_name);
      double v = (double)(at - c->vocab[k] + 1);
      vals[r * c->ncols + col] = v;
      note_bad(c, col, t->line[r], v, name);
    }
  }
  free(sorted);
  return 0;
oom:
  free(sorted);
  return -1;
}

int dl_csv_read(dl_ctx *ctx, const char *path, const dl_csv_opts *o, dl_csv *out) {
  reader r = {gzopen(path, "rb"), NULL, 0, 0};
  if (!r.f) {
    dl_fail(ctx, "csv: cannot open '%s': %s", path, strerror(errno));
    return -1;
  }
  dl_csv c = {0};
  text_names names = {0};
  char **fields = NULL;
  int fcap = 0, rc = -1;
  double *vals = NULL;
  size_t nvals = 0, vcap = 0;
  int64_t rows = 0;
  size_t len;
  int got;
  /* the first non-empty line: header or first row */
  while ((got = next_line(&r, &len)) == 1 && blank(r.line)) {}
  if (got == 0) {
    dl_fail(ctx, "csv: '%s' is empty", path);
    goto done;
  }
  if (got == -2) goto oom;
  if (got < 0) goto read_error;
  int first_is_data = !o->header;
  c.ncols = split(r.line, len, o->delimiter, &fields, &fcap);
  if (c.ncols < 0) goto oom;
  c.names = calloc((size_t)c.ncols, sizeof *c.names);
  c.integral = malloc((size_t)c.ncols * sizeof *c.integral);
  c.bad = calloc((size_t)c.ncols * DL_CSV_NCHECK, sizeof *c.bad);
  if (!c.names || !c.integral || !c.bad) goto oom;
  for (int i = 0; i < c.ncols; i++) {
    char num[16];
    snprintf(num, sizeof num, "%d", i + 1);
    c.names[i] = strdup(o->header ? fields[i] : num);
    if (!c.names[i]) goto oom;
    c.integral[i] = 1;
    if (o->header && !fields[i][0]) {
      dl_fail(ctx, "csv: '%s' line %ld: column %d has no name in the header", path, r.lineno, i + 1);
      goto done;
    }
  }
  if (text_columns(ctx, path, o, &c) < 0) goto done;
  for (;;) {
    if (first_is_data) {
      first_is_data = 0;
      /* re-split: the header pass above left the fields in place */
    } else {
      got = next_line(&r, &len);
      if (got == 0) break;
      if (got == -2) goto oom;
      if (got < 0) goto read_error;
      if (blank(r.line)) continue;
      int nf = split(r.line, len, o->delimiter, &fields, &fcap);
      if (nf < 0) goto oom;
      if (nf != c.ncols) {
        dl_fail(ctx, "csv: '%s' line %ld has %d fields, expected %d%s", path, r.lineno, nf, c.ncols,
                o->header ? " (as many as the header has columns)" : " (as many as the first row)");
        goto done;
      }
    }
    if (nvals + (size_t)c.ncols > vcap) {
      size_t cap = vcap ? vcap * 2 : 4096;
      while (cap < nvals + (size_t)c.ncols) cap *= 2;
      double *v = realloc(vals, cap * sizeof *v);
      if (!v) goto oom;
      vals = v;
      vcap = cap;
    }
    if (c.ntext && keep_names(&names, c.ntext, fields, c.text_col, r.lineno) < 0) goto oom;
    for (int i = 0; i < c.ncols; i++) {
      const char *s = fields[i];
      double v;
      int k = text_index(&c, i);
      if (k >= 0) {
        if (!*s) {
          dl_fail(ctx, "csv: '%s' line %ld, column '%s' (%d): missing class name", path, r.lineno, c.names[i], i + 1);
          goto done;
        }
        v = 0;                                /* the name's class, once the vocabulary is known */
      } else if (!*s) {
        if (!o->has_missing) {
          dl_fail(ctx, "csv: '%s' line %ld, column '%s' (%d): missing value", path, r.lineno, c.names[i], i + 1);
          goto done;
        }
        v = o->missing;
        if (v != floor(v)) c.integral[i] = 0;
        note_bad(&c, i, r.lineno, v, "(missing)");
      } else {
        char *end;
        errno = 0;
        v = strtod(s, &end);
        if (end == s || *end || hex(s)) {
          dl_fail(ctx, "csv: '%s' line %ld, column '%s' (%d): '%.40s' is not a %snumber", path, r.lineno, c.names[i],
                  i + 1, s, end == s || *end ? "" : "decimal ");
          goto done;
        }
        if (errno == ERANGE && (isinf(v) || v == 0)) {      /* overflow, or underflow to zero */
          dl_fail(ctx, "csv: '%s' line %ld, column '%s' (%d): '%.40s' is out of float64's range", path, r.lineno,
                  c.names[i], i + 1, s);
          goto done;
        }
        if (!written_as_integer(s) || fabs(v) > 9007199254740992.0) c.integral[i] = 0;
        note_bad(&c, i, r.lineno, v, s);
      }
      vals[nvals++] = v;
    }
    rows++;
  }
  if (c.ntext && classes(&c, &names, vals) < 0) goto oom;
  int64_t shape[2] = {rows, c.ncols};
  c.values = dl_tensor_new_empty(ctx, DL_F64, 2, shape);
  if (!c.values) goto done;
  if (nvals) memcpy(c.values->st->data, vals, nvals * sizeof *vals);
  *out = c;
  memset(&c, 0, sizeof c);
  rc = 0;
  goto done;
read_error: {
    int errnum;
    dl_fail(ctx, "csv: '%s': decompression failed after line %ld: %s", path, r.lineno, gzerror(r.f, &errnum));
    goto done;
  }
oom:
  ctx->oom = 1;
  dl_fail(ctx, "csv: out of memory reading '%s' at line %ld", path, r.lineno);
done:
  gzclose(r.f);
  free(r.line);
  free(fields);
  free(vals);
  names_free(&names, o->ntext);
  dl_csv_free(&c);
  return rc;
}

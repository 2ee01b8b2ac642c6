/* csv.c -- reads numeric CSV tables (plain or gzip) into one float64 matrix.
 *
 * Lines are read with gzgets into a growing buffer, split on the delimiter
 * (RFC 4180 quotes within a line are honoured; a quoted newline is not), and
 * every field is parsed with strtod. The result is a [rows, columns] float64
 * tensor plus, per column, whether all its values were written as integers,
 * which the Lua side uses to pick int32 or float32, and the first value each
 * integer dtype could not hold (dl_csv_dtype_problem), so a column stored as
 * int32 never saturates 2147483648 to 2147483647 in silence. Typing, grouping
 * columns into fields and 0-based labels are the Lua side's business (data.csv).
 */
/* See LICENSE */
#include "io/csv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

dl_csv_opts dl_csv_defaults(void) {
  dl_csv_opts o = {',', 1, 0, 0.0};
  return o;
}

void dl_csv_free(dl_csv *c) {
  if (!c) return;
  if (c->names)
    for (int i = 0; i < c->ncols; i++) free(c->names[i]);
  free(c->names);
  free(c->integral);
  free(c->bad);
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

/* splits line in place into fields (pointers into the line); returns the count */
static int split(char *line, char delim, char ***fields, int *cap) {
  int n = 0;
  char *p = line;
  for (;;) {
    if (n == *cap) {
      int c = *cap ? *cap * 2 : 16;
      char **f = realloc(*fields, (size_t)c * sizeof *f);
      if (!f) return -1;
      *fields = f;
      *cap = c;
    }
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '"') {                      /* quoted: "" is a quote; unquote in place */
      char *w = ++p, *start = w;
      for (;;) {
        if (*p == 0) break;
        if (*p == '"' && p[1] == '"') { *w++ = '"'; p += 2; continue; }
        if (*p == '"') { p++; break; }
        *w++ = *p++;
      }
      while (*p && *p != delim) p++;
      int more = *p == delim;
      *w = 0;
      (*fields)[n++] = start;
      if (!more) break;
      p++;
      continue;
    }
    (*fields)[n++] = p;
    char *e = strchr(p, delim);
    if (!e) break;
    *e = 0;
    p = e + 1;
  }
  for (int i = 0; i < n; i++) {             /* trim trailing blanks */
    char *s = (*fields)[i];
    size_t l = strlen(s);
    while (l > 0 && (s[l - 1] == ' ' || s[l - 1] == '\t')) s[--l] = 0;
  }
  return n;
}

static int blank(const char *s) {
  for (; *s; s++)
    if (*s != ' ' && *s != '\t') return 0;
  return 1;
}

static const dl_dtype int_dtypes[DL_CSV_NINT] = {DL_I32, DL_I64, DL_U8};

/* 1 if v is an integer that dtype k of int_dtypes holds exactly */
static int fits(double v, int k) {
  if (!(v == floor(v))) return 0;                        /* also NaN and infinities */
  switch (k) {
    case 0: return v >= -2147483648.0 && v <= 2147483647.0;
    case 1: return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    default: return v >= 0 && v <= 255;
  }
}

static void note_bad(dl_csv *c, int col, long line, double v, const char *text) {
  for (int k = 0; k < DL_CSV_NINT; k++) {
    dl_csv_bad *b = &c->bad[col * DL_CSV_NINT + k];
    if (b->line || fits(v, k)) continue;
    b->line = line;
    b->nonint = !(v == floor(v));
    snprintf(b->text, sizeof b->text, "%s", text);
  }
}

const char *dl_csv_dtype_problem(const dl_csv *c, const char *path, int col, dl_dtype d, char *buf, size_t n) {
  for (int k = 0; k < DL_CSV_NINT; k++) {
    const dl_csv_bad *b = &c->bad[col * DL_CSV_NINT + k];
    if (int_dtypes[k] != d || !b->line) continue;
    snprintf(buf, n, "csv: '%s' line %ld, column '%s' (%d): %s %s %s", path, b->line, c->names[col], col + 1, b->text,
             b->nonint ? "is not an integer, as" : "is out of range for", dl_dtype_name(d));
    return buf;
  }
  return NULL;
}

static int written_as_integer(const char *s) {
  if (*s == '+' || *s == '-') s++;
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

int dl_csv_read(dl_ctx *ctx, const char *path, const dl_csv_opts *o, dl_csv *out) {
  reader r = {gzopen(path, "rb"), NULL, 0, 0};
  if (!r.f) {
    dl_fail(ctx, "csv: cannot open '%s': %s", path, strerror(errno));
    return -1;
  }
  dl_csv c = {0};
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
  c.ncols = split(r.line, o->delimiter, &fields, &fcap);
  if (c.ncols < 0) goto oom;
  c.names = calloc((size_t)c.ncols, sizeof *c.names);
  c.integral = malloc((size_t)c.ncols * sizeof *c.integral);
  c.bad = calloc((size_t)c.ncols * DL_CSV_NINT, sizeof *c.bad);
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
      int nf = split(r.line, o->delimiter, &fields, &fcap);
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
    for (int i = 0; i < c.ncols; i++) {
      const char *s = fields[i];
      double v;
      if (!*s) {
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
        if (end == s || *end) {
          dl_fail(ctx, "csv: '%s' line %ld, column '%s' (%d): '%.40s' is not a number", path, r.lineno, c.names[i],
                  i + 1, s);
          goto done;
        }
        if (!written_as_integer(s) || fabs(v) > 9007199254740992.0) c.integral[i] = 0;
        note_bad(&c, i, r.lineno, v, s);
      }
      vals[nvals++] = v;
    }
    rows++;
  }
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
  dl_csv_free(&c);
  return rc;
}

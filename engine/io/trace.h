/* trace.h -- a span recorder that writes Chrome trace-event JSON.
 *
 * Worked example (what the pipeline and dl.trace do):
 *
 *   dl_trace *tr = dl_trace_new();
 *   dl_trace_start(tr);
 *   int64_t t0 = dl_trace_now();
 *   ... work ...
 *   dl_trace_span(tr, "read", "pipeline", 1001, t0, dl_trace_now());
 *   dl_trace_write_stop(tr, "trace.json", err, sizeof err);   // opens in Perfetto
 *   dl_trace_free(tr);
 *
 * Spans are recorded complete (begin and end known) from any thread and
 * written as matched "B"/"E" pairs sorted by timestamp, so a reader that
 * keeps one stack per thread sees them nest. Names are copied (up to 47
 * bytes). Recording is off until dl_trace_start; spans offered while off are
 * dropped, so callers need no checks of their own.
 */
/* See LICENSE */
#ifndef DL_TRACE_H
#define DL_TRACE_H

#include <stddef.h>
#include <stdint.h>

typedef struct dl_trace dl_trace;

#define DL_TRACE_MAIN_TID 1        /* the thread running Lua */

/* A new, idle recorder, or NULL when out of memory. */
dl_trace *dl_trace_new(void);
void dl_trace_free(dl_trace *tr);                  /* NULL is a no-op */

int64_t dl_trace_now(void);                        /* monotonic clock, nanoseconds */

/* Drops anything recorded and starts recording; timestamps in the file are
 * relative to this moment. */
void dl_trace_start(dl_trace *tr);
int dl_trace_active(dl_trace *tr);

/* Records a span [begin_ns, end_ns] on thread tid (any thread may call). A
 * span that ends before it begins is stored with a duration of 1 ns. */
void dl_trace_span(dl_trace *tr, const char *name, const char *cat, int tid, int64_t begin_ns, int64_t end_ns);

/* Names a thread in the file ("pipeline 1 worker 2"); the last name given wins. */
void dl_trace_thread_name(dl_trace *tr, int tid, const char *name);

/* Stops recording and writes the JSON file (an atomic replace: a reader, or a
 * process that dies meanwhile, sees the old document or the new one). Returns
 * the number of spans written, or -1 with a message in err ("trace: cannot
 * write '<path>': ..."; the recording is dropped either way). */
long dl_trace_write_stop(dl_trace *tr, const char *path, char *err, size_t errlen);

/* Writes what was recorded so far (as dl_trace_write_stop does) and keeps
 * recording. Returns the number of spans written, or -1 with err. At the
 * start of a recording it writes a valid empty trace, so the path holds JSON
 * from the first moment. */
long dl_trace_flush(dl_trace *tr, const char *path, char *err, size_t errlen);

/* Stops recording and drops what was recorded, writing nothing. */
void dl_trace_discard(dl_trace *tr);

#endif

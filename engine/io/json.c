/* json.c -- writes JSON string literals for the engine's two JSON writers (checkpoint
 * headers, trace files), so both escape the same bytes the same way. It holds no JSON
 * parser: checkpoint_json.c reads headers, and nothing else in the engine reads JSON.
 */
/* See LICENSE */
#include "io/json.h"

#include <stdio.h>

void dl_json_string(dl_json_put put, void *sink, const char *s, size_t n) {
  put(sink, "\"", 1);
  size_t run = 0;                             /* s[run, i) is passed through unescaped */
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c != '"' && c != '\\' && c >= 0x20) continue;
    put(sink, s + run, i - run);
    run = i + 1;
    char esc[8];
    switch (c) {
      case '"': put(sink, "\\\"", 2); break;
      case '\\': put(sink, "\\\\", 2); break;
      case '\n': put(sink, "\\n", 2); break;
      case '\r': put(sink, "\\r", 2); break;
      case '\t': put(sink, "\\t", 2); break;
      default:
        snprintf(esc, sizeof esc, "\\u%04x", c);
        put(sink, esc, 6);
    }
  }
  put(sink, s + run, n - run);
  put(sink, "\"", 1);
}

/* json.h -- the one JSON string escaper of the engine (checkpoint headers, trace files).
 * It writes; reading JSON stays with its one reader (checkpoint_json.c). */
/* See LICENSE */
#ifndef DL_JSON_H
#define DL_JSON_H

#include <stddef.h>

/* Where escaped text goes: put(sink, bytes, n) is called with consecutive pieces. */
typedef void (*dl_json_put)(void *sink, const char *s, size_t n);

/* Writes s (n bytes, passed through as they are: the caller sees to valid UTF-8) as a JSON
 * string literal with its quotes: '"' and '\\' escaped, \n \r \t by name, other control
 * bytes as \u00XX. Cannot fail (put carries its own failure state). */
void dl_json_string(dl_json_put put, void *sink, const char *s, size_t n);

#endif

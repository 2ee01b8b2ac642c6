/* env.c -- reading the environment switches (env.h): one parser per kind of value. */
/* See LICENSE */
#include "core/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *dl_env_get(const char *name) {
  const char *s = getenv(name);
  return s && *s ? s : NULL;
}

int dl_env_flag(const char *name, int dflt) {
  const char *s = dl_env_get(name);
  if (!s) return dflt;
  if (strcmp(s, "0") == 0) return 0;
  if (strcmp(s, "1") == 0) return 1;
  return -1;
}

long dl_env_long(const char *name, long lo, long hi, long dflt) {
  const char *s = dl_env_get(name);
  if (!s) return dflt;
  long v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    if (v > (hi - (*p - '0')) / 10) return -1;          /* past hi, before it could overflow */
    v = v * 10 + (*p - '0');
  }
  return v < lo ? -1 : v;
}

int dl_env_flag_error(const char *name, char *msg, size_t cap) {
  if (dl_env_flag(name, 0) >= 0) return 0;
  snprintf(msg, cap, "%s=%.40s: not a switch value (valid: 0, 1)", name, getenv(name));
  return 1;
}

int dl_env_long_error(const char *name, long lo, long hi, char *msg, size_t cap) {
  if (dl_env_long(name, lo, hi, lo) >= 0) return 0;
  snprintf(msg, cap, "%s=%.40s: not a whole number from %ld to %ld", name, getenv(name), lo, hi);
  return 1;
}

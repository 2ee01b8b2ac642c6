/* env.h -- the environment switches (DLUA_* variables that choose a kernel path or a numeric
 * mode, dlua(1)): one reader per kind of value, so that every switch reads its value the same
 * way and a malformed one is an error that names the valid values, never a silent default.
 *
 * A switch's owner reads it where it makes its choice (dl_env_flag, dl_env_long) and gives the
 * module a check (its *_env_error function, built on dl_env_flag_error or dl_env_long_error);
 * lua_machine.c's table of switches runs every check when the Lua module loads, so a process
 * with a malformed switch stops before it computes anything. */
/* See LICENSE */
#ifndef DL_ENV_H
#define DL_ENV_H

#include <stddef.h>

/* The value of a switch, NULL when it is unset or "" (both mean the default). */
const char *dl_env_get(const char *name);

/* A switch that is on or off: "1" is 1, "0" is 0, unset or "" is dflt; anything else is -1. */
int dl_env_flag(const char *name, int dflt);

/* A whole number in [lo, hi] (lo >= 0), written in decimal digits only; unset or "" is dflt;
 * anything else (a sign, a unit, a fraction, out of range) is -1. */
long dl_env_long(const char *name, long lo, long hi, long dflt);

/* 0 when the switch is unset or valid; otherwise 1, with the message in msg (cap bytes):
 * "NAME=value: not a switch value (valid: 0, 1)" or "NAME=value: not a whole number from lo to hi". */
int dl_env_flag_error(const char *name, char *msg, size_t cap);
int dl_env_long_error(const char *name, long lo, long hi, char *msg, size_t cap);

#endif

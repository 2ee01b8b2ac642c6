/* proc.h -- signals and child processes: how a run is interrupted, and how a
 * study starts, watches and stops its trials.
 *
 * Signals (one process-wide set, like the signal dispositions themselves):
 *   dl_signal_catch() installs handlers for SIGINT and SIGTERM (the interrupt
 *   a user asks for), SIGWINCH (the terminal was resized) and SIGCHLD (a
 *   child changed state). The handler only counts and writes one byte to a
 *   non-blocking self-pipe, so a waiter in poll(2) wakes at once; nothing else
 *   happens in it, except that a *second* SIGINT or SIGTERM restores the
 *   default action and re-raises the signal: the process stops at once, as
 *   the user asked twice. Everything durable was written atomically before
 *   (engine/io/fileio.c), so the last checkpoint stays valid. The loop that
 *   wants to stop cleanly polls dl_signal_pending() between its steps.
 *   Catching nests (a count); dl_signal_release() restores the previous
 *   dispositions when the last catch is released. A signal ignored when the
 *   first catch is installed (a background job of a non-interactive shell
 *   ignores SIGINT) stays ignored.
 *
 * Sleeping: dl_sleep() sleeps in poll(2) on the self-pipe and returns early
 * when an interrupt is pending; dl_wait_event() also returns when a child
 * changed state. Without a catch they sleep in nanosleep (a SIGINT with the
 * default action ends the process, unlike `os.execute("sleep 1")`, where the
 * shell's sleep takes it).
 *
 * Processes: dl_proc_spawn() runs a program with fork and execve. Everything
 * the child needs (argv, the environment, the resolved path) is built before
 * the fork, so between fork and exec the child calls only async-signal-safe
 * functions (the parent may run pipeline threads). The child gets its own
 * process group (a terminal's Ctrl-C reaches the parent only; the parent
 * forwards it to the group with dl_proc_signal), the default action for every
 * signal this module catches, an empty signal mask, stdin from /dev/null,
 * stdout and stderr appended to files, and on Linux a parent-death signal
 * (prctl PR_SET_PDEATHSIG): when the parent dies, however, the child gets
 * that signal, so a trial cannot outlive the study that started it. An exec
 * that fails is reported by the spawn, not by a child exiting 127.
 */
/* See LICENSE */
#ifndef DL_PROC_H
#define DL_PROC_H

#include "core/dl.h"

/* ------------------------------------------------------------ signals */

/* Installs the handlers (see above); nests. Interrupts caught earlier stay
 * pending (a process that loops over several runs stops at the next one too,
 * and a further signal ends it at once) until dl_signal_clear. Returns 0, or
 * -1 with ctx->err ("cannot catch signals: <reason>"). */
int dl_signal_catch(dl_ctx *ctx);

/* Undoes one dl_signal_catch; the last one restores the dispositions that
 * were there before the first. The counts are kept (the caller may still
 * read what stopped it). A release without a catch does nothing. */
void dl_signal_release(void);

/* Is a catch installed? Test-only API: tests/c/test_proc.c checks the catch/release
 * nesting through it; the engine itself never asks. */
int dl_signal_caught(void);

/* The first interrupting signal caught (SIGINT or SIGTERM) since the start or
 * the last dl_signal_clear, or 0; *count (if not NULL) gets how many were caught. */
int dl_signal_pending(int *count);

/* Forgets caught interrupts (count and first signal). */
void dl_signal_clear(void);

/* How many SIGWINCH were caught since the process started: a reader of the
 * terminal's width re-reads it when this changed. */
unsigned long dl_signal_winch_count(void);

/* Sleeps seconds (>= 0). Returns 1 at once or early when an interrupt is
 * pending (caught SIGINT/SIGTERM), else 0 after the full time. */
int dl_sleep(double seconds);

/* Waits up to seconds for an event: a child changed state, an interrupt, a
 * resize. Returns 1 on an event (it may be spurious: poll the children), 0
 * on timeout. Without a catch it just sleeps and returns 0. */
int dl_wait_event(double seconds);

/* The width in columns of the terminal on fd, or 0 when fd is no terminal
 * or reports no width. */
int dl_term_width(int fd);

/* The signal number for a name ("INT", "SIGINT", "TERM", "KILL", "HUP",
 * "QUIT", "USR1", "USR2", "CONT", "STOP", "WINCH", "CHLD"), or 0. */
int dl_signal_number(const char *name);

/* The name ("SIGINT") of a signal number, or "SIG?" */
const char *dl_signal_name(int sig);

/* ------------------------------------------------------------ processes */

typedef struct {
  const char *const *argv;    /* argv[0] is the program: with a '/' a path, else searched in PATH */
  const char *cwd;            /* NULL: the parent's */
  const char *stdout_path;    /* appended to (created 0666 & ~umask); NULL: the parent's stdout */
  const char *stderr_path;    /* likewise; NULL with stderr_to_stdout = 0: the parent's stderr */
  int stderr_to_stdout;       /* stderr goes where stdout goes */
  const char *const *env;     /* "KEY=VALUE" entries set on top of the parent's environment */
  int new_group;              /* the child leads a new process group (its pgid is its pid) */
  int death_signal;           /* signal the child gets when the parent dies (Linux); 0: none */
} dl_proc_opts;

/* The defaults: the parent's cwd, stdout and stderr; a new process group; SIGTERM
 * at the parent's death. */
dl_proc_opts dl_proc_defaults(void);

/* Starts argv with o. Returns the child's pid (> 0), or -1 with ctx->err
 * ("cannot start '<argv0>': <reason>", where reason names the file when a
 * redirection or the cwd failed: "cannot open 'log': No such file or
 * directory") and no child left running. */
long dl_proc_spawn(dl_ctx *ctx, const dl_proc_opts *o);

/* Checks on child pid without blocking (wait = 0) or waits for it (wait = 1).
 * Returns 0 while it runs, 1 once it ended (then *code is its exit status, or
 * 128 + the signal that ended it, and *sig that signal or 0; the child is
 * reaped, so ask once), or -1 with ctx->err ("cannot wait for process <pid>:
 * <reason>", e.g. not a child of this process). */
int dl_proc_poll(dl_ctx *ctx, long pid, int wait, int *code, int *sig);

/* Sends sig to process pid, or to its process group (group = 1). Returns 0,
 * or -1 with ctx->err ("cannot signal process <pid>: <reason>"). A process
 * that ended already (ESRCH) is not an error. */
int dl_proc_signal(dl_ctx *ctx, long pid, int sig, int group);

/* Does process pid exist (kill(pid, 0); a zombie counts)? */
int dl_proc_alive(long pid);

#endif

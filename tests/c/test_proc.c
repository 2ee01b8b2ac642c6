/* test_proc.c -- engine/sys/proc.c from C: the first SIGINT/SIGTERM only sets the
 * flag and the second ends the process by that signal (checked in forked
 * children), sleeps and event waits that wake on signals and child exits
 * (timed against what they would take otherwise), spawned children (exit
 * codes, 128 + signal, output appended to files, stderr joined to stdout,
 * the environment on top, the exact messages of a failed spawn), a process
 * group signalled as a whole, and the parent-death signal ending a child
 * whose parent died. */
/* See LICENSE */
#define _DEFAULT_SOURCE           /* usleep, getpgid */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dl_test.h"
#include "sys/proc.h"

static char dir[64];

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long slurp(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = 0;
  return (long)n;
}

/* gone or a zombie: the process no longer runs */
static int ended(long pid) {
  char p[64], buf[512];
  snprintf(p, sizeof p, "/proc/%ld/stat", pid);
  if (slurp(p, buf, sizeof buf) < 0) return 1;
  const char *close_paren = strrchr(buf, ')');
  return close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z';
}

static int wait_ended(long pid, double seconds) {
  double t0 = now();
  while (now() - t0 < seconds) {
    if (ended(pid)) return 1;
    usleep(10000);
  }
  return ended(pid);
}

/* a forked child catches, gets sig1 then sig2 from itself; returns its wait status */
static int child_two_signals(int sig1, int sig2) {
  pid_t pid = fork();
  if (pid == 0) {
    dl_ctx *ctx = dl_ctx_new();
    if (dl_signal_catch(ctx) < 0) _exit(10);
    raise(sig1);
    int count;
    if (dl_signal_pending(&count) != sig1 || count != 1) _exit(11);
    if (sig2 == 0) _exit(0);
    raise(sig2);
    _exit(12);                                 /* not reached: the second one ends the process */
  }
  int st;
  waitpid(pid, &st, 0);
  return st;
}

static void test_signals(void) {
  int st = child_two_signals(SIGINT, 0);
  DL_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);     /* the first one only sets the flag */
  st = child_two_signals(SIGTERM, 0);
  DL_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  st = child_two_signals(SIGINT, SIGINT);
  DL_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT);
  st = child_two_signals(SIGTERM, SIGINT);
  DL_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT);
  st = child_two_signals(SIGINT, SIGTERM);
  DL_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);

  DL_CHECK(dl_signal_number("INT") == SIGINT && dl_signal_number("SIGTERM") == SIGTERM);
  DL_CHECK(dl_signal_number("KILL") == SIGKILL && dl_signal_number("bogus") == 0 && dl_signal_number(NULL) == 0);
  DL_CHECK(strcmp(dl_signal_name(SIGTERM), "SIGTERM") == 0 && strcmp(dl_signal_name(0), "SIG?") == 0);

  /* in this process: catch nests; the flag, the sleep that returns at once, release */
  dl_ctx *ctx = dl_ctx_new();
  DL_CHECK(dl_signal_catch(ctx) == 0);
  DL_CHECK(dl_signal_catch(ctx) == 0);
  DL_CHECK(dl_signal_caught());
  int count = -1;
  DL_CHECK(dl_signal_pending(&count) == 0 && count == 0);
  double t0 = now();
  DL_CHECK(dl_sleep(0.05) == 0);
  DL_CHECK(now() - t0 >= 0.049);
  raise(SIGTERM);
  DL_CHECK(dl_signal_pending(&count) == SIGTERM && count == 1);
  t0 = now();
  DL_CHECK(dl_sleep(5) == 1);
  DL_CHECK(now() - t0 < 0.1);
  dl_signal_clear();
  DL_CHECK(dl_signal_pending(&count) == 0 && count == 0);

  /* a signal from another process wakes a sleep in progress */
  pid_t me = getpid();
  pid_t k = fork();
  if (k == 0) {
    usleep(100000);
    kill(me, SIGINT);
    _exit(0);
  }
  t0 = now();
  DL_CHECK(dl_sleep(10) == 1);
  double took = now() - t0;
  DL_CHECK(took >= 0.09 && took < 2);
  waitpid(k, NULL, 0);
  DL_CHECK(dl_signal_pending(NULL) == SIGINT);
  dl_signal_clear();

  /* SIGWINCH counts */
  unsigned long w = dl_signal_winch_count();
  raise(SIGWINCH);
  DL_CHECK(dl_signal_winch_count() == w + 1);

  raise(SIGINT);                                /* pending across release and a new catch */
  dl_signal_release();
  DL_CHECK(dl_signal_caught());
  dl_signal_release();
  DL_CHECK(!dl_signal_caught());
  DL_CHECK(dl_signal_pending(&count) == SIGINT && count == 1);
  DL_CHECK(dl_signal_catch(ctx) == 0);
  DL_CHECK(dl_signal_pending(&count) == SIGINT && count == 1);
  DL_CHECK(dl_sleep(1) == 1);
  dl_signal_release();
  dl_signal_clear();
  dl_signal_release();                          /* one too many: nothing */
  struct sigaction sa;
  sigaction(SIGINT, NULL, &sa);
  DL_CHECK(sa.sa_handler == SIG_DFL);

  int p[2];
  DL_CHECK(pipe(p) == 0);
  DL_CHECK(dl_term_width(p[0]) == 0);           /* not a terminal */
  close(p[0]);
  close(p[1]);
  dl_ctx_free(ctx);
}

static long spawn_sh(dl_ctx *ctx, const char *script, const char *out, const char *const *env) {
  const char *argv[] = {"sh", "-c", script, NULL};
  dl_proc_opts o = dl_proc_defaults();
  o.argv = argv;
  o.stdout_path = out;
  o.stderr_to_stdout = 1;
  o.env = env;
  return dl_proc_spawn(ctx, &o);
}

static void test_spawn(void) {
  dl_ctx *ctx = dl_ctx_new();
  char log[128], buf[256];
  snprintf(log, sizeof log, "%s/out.log", dir);
  int code = -1, sig = -1;

  long pid = spawn_sh(ctx, "echo out; echo err >&2; exit 7", log, NULL);
  DL_CHECK(pid > 0);
  DL_CHECK(dl_proc_poll(ctx, pid, 1, &code, &sig) == 1 && code == 7 && sig == 0);
  DL_CHECK(slurp(log, buf, sizeof buf) > 0 && strcmp(buf, "out\nerr\n") == 0);
  DL_CHECK(dl_proc_poll(ctx, pid, 0, &code, &sig) == -1);   /* reaped already */
  snprintf(buf, sizeof buf, "cannot wait for process %ld: not a child of this process (or reaped already)", pid);
  DL_CHECK(strcmp(ctx->err, buf) == 0);

  const char *env[] = {"DL_PROC_TEST=yes", "HOME=/elsewhere", NULL};
  pid = spawn_sh(ctx, "echo $DL_PROC_TEST $HOME", log, env);        /* appended */
  DL_CHECK(dl_proc_poll(ctx, pid, 1, &code, &sig) == 1 && code == 0);
  DL_CHECK(slurp(log, buf, sizeof buf) > 0 && strcmp(buf, "out\nerr\nyes /elsewhere\n") == 0);

  pid = spawn_sh(ctx, "kill -TERM $$; sleep 5", NULL, NULL);
  DL_CHECK(dl_proc_poll(ctx, pid, 1, &code, &sig) == 1 && code == 143 && sig == SIGTERM);

  /* a running child: poll says so; SIGINT reaches it (the default action: not ignored) */
  pid = spawn_sh(ctx, "sleep 5", NULL, NULL);
  DL_CHECK(dl_proc_poll(ctx, pid, 0, &code, &sig) == 0);
  DL_CHECK(dl_proc_alive(pid));
  DL_CHECK(dl_proc_signal(ctx, pid, SIGINT, 1) == 0);
  DL_CHECK(dl_proc_poll(ctx, pid, 1, &code, &sig) == 1 && code == 130 && sig == SIGINT);
  DL_CHECK(dl_proc_signal(ctx, pid, SIGTERM, 0) == 0);       /* ended already: no error */

  /* failures: the message names the program and the file */
  const char *nope[] = {"dl-no-such-program-xyz", NULL};
  dl_proc_opts o = dl_proc_defaults();
  o.argv = nope;
  DL_CHECK(dl_proc_spawn(ctx, &o) == -1);
  DL_CHECK(strcmp(ctx->err, "cannot start 'dl-no-such-program-xyz': not found in PATH") == 0);
  const char *sh[] = {"/bin/sh", "-c", "exit 0", NULL};
  o.argv = sh;
  o.stdout_path = "/nonexistent-dir/x.log";
  DL_CHECK(dl_proc_spawn(ctx, &o) == -1);
  DL_CHECK(strcmp(ctx->err, "cannot start '/bin/sh': cannot open '/nonexistent-dir/x.log': "
                            "No such file or directory") == 0);
  o.stdout_path = NULL;
  o.cwd = "/nonexistent-dir";
  DL_CHECK(dl_proc_spawn(ctx, &o) == -1);
  DL_CHECK(strcmp(ctx->err, "cannot start '/bin/sh': cannot change to directory '/nonexistent-dir': "
                            "No such file or directory") == 0);
  char plain[128];
  snprintf(plain, sizeof plain, "%s/plain.txt", dir);
  FILE *pf = fopen(plain, "w");
  fputs("not a program\n", pf);
  fclose(pf);
  chmod(plain, 0644);
  const char *notexec[] = {plain, NULL};
  o.cwd = NULL;
  o.argv = notexec;
  DL_CHECK(dl_proc_spawn(ctx, &o) == -1);
  snprintf(buf, sizeof buf, "cannot start '%s': Permission denied", plain);
  DL_CHECK(strcmp(ctx->err, buf) == 0);
  o.argv = NULL;
  DL_CHECK(dl_proc_spawn(ctx, &o) == -1);
  DL_CHECK(strcmp(ctx->err, "cannot start a process: no program given") == 0);
  DL_CHECK(dl_proc_signal(ctx, 0, SIGTERM, 1) == -1);
  DL_CHECK(strcmp(ctx->err, "cannot signal process 0: not a process id") == 0);
  dl_ctx_free(ctx);
}

/* the whole group gets the signal: a grandchild in the background ends too */
static void test_group(void) {
  dl_ctx *ctx = dl_ctx_new();
  char pidfile[128], script[512], buf[64];
  snprintf(pidfile, sizeof pidfile, "%s/grandchild.pid", dir);
  snprintf(script, sizeof script, "sleep 30 & echo $! > %s.tmp; mv %s.tmp %s; wait", pidfile, pidfile, pidfile);
  long pid = spawn_sh(ctx, script, NULL, NULL);
  double t0 = now();
  while (slurp(pidfile, buf, sizeof buf) <= 0 && now() - t0 < 5) usleep(10000);
  long gpid = atol(buf);
  DL_CHECK(gpid > 0 && !ended(gpid));
  DL_CHECK(getpgid((pid_t)pid) == (pid_t)pid);           /* leads its own group */
  DL_CHECK(getpgid((pid_t)gpid) == (pid_t)pid);
  DL_CHECK(getpgid(0) != (pid_t)pid);
  int code, sig;
  DL_CHECK(dl_proc_signal(ctx, pid, SIGTERM, 1) == 0);
  DL_CHECK(dl_proc_poll(ctx, pid, 1, &code, &sig) == 1 && sig == SIGTERM);
  DL_CHECK(wait_ended(gpid, 5));
  dl_ctx_free(ctx);
}

/* a child whose parent dies gets the death signal */
static void test_parent_death(void) {
  int p[2];
  DL_CHECK(pipe(p) == 0);
  pid_t mid = fork();
  if (mid == 0) {                               /* the parent that dies */
    dl_ctx *ctx = dl_ctx_new();
    const char *argv[] = {"sleep", "30", NULL};
    dl_proc_opts o = dl_proc_defaults();
    o.argv = argv;
    long pid = dl_proc_spawn(ctx, &o);
    ssize_t w = write(p[1], &pid, sizeof pid);
    _exit(w == (ssize_t)sizeof pid ? 0 : 1);
  }
  close(p[1]);
  long pid = 0;
  DL_CHECK(read(p[0], &pid, sizeof pid) == (ssize_t)sizeof pid);
  close(p[0]);
  waitpid(mid, NULL, 0);
  DL_CHECK(pid > 0);
  DL_CHECK(wait_ended(pid, 5));
}

/* wait_event wakes when a child ends, sleeps its time otherwise */
static void test_wait_event(void) {
  dl_ctx *ctx = dl_ctx_new();
  DL_CHECK(dl_signal_catch(ctx) == 0);
  double t0 = now();
  DL_CHECK(dl_wait_event(0.05) == 0);
  DL_CHECK(now() - t0 >= 0.049);
  long pid = spawn_sh(ctx, "sleep 0.1", NULL, NULL);
  t0 = now();
  int code, sig;
  while (dl_proc_poll(ctx, pid, 0, &code, &sig) == 0) DL_CHECK(dl_wait_event(10) == 1);
  DL_CHECK(now() - t0 < 2);
  dl_signal_release();
  dl_ctx_free(ctx);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/dl-test-proc-%d", (int)getpid());
  mkdir(dir, 0700);
  test_signals();
  test_spawn();
  test_group();
  test_parent_death();
  test_wait_event();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  DL_TEST_END();
}

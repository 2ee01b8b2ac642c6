/* proc.c -- signal handling for a clean interrupt, sleeps that wake on
 * signals, the terminal's width, and child processes (fork/execve, process
 * groups, waitpid, output to files, a parent-death signal). The contracts are
 * in proc.h.
 *
 * The handler touches only volatile sig_atomic_t counters and write(2)s one
 * byte to a non-blocking self-pipe (both async-signal-safe); on the second
 * interrupt it calls sigaction and raise (async-signal-safe too). The child
 * of a spawn, between fork and execve, calls only async-signal-safe
 * functions: everything it needs was allocated before the fork.
 */
/* See LICENSE */
#define _GNU_SOURCE             /* SIGWINCH, struct winsize under a strict -std */
#include "sys/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

extern char **environ;

/* ------------------------------------------------------------ signals */

static volatile sig_atomic_t g_interrupts;   /* SIGINT/SIGTERM caught (until dl_signal_clear) */
static volatile sig_atomic_t g_first;        /* the first of them, or 0 */
static volatile sig_atomic_t g_winch;        /* SIGWINCH caught (wraps; only changes matter) */
static int g_pipe[2] = {-1, -1};             /* the self-pipe: read end, write end */
static int g_catches;                        /* nesting of dl_signal_catch */

static const int caught_signals[] = {SIGINT, SIGTERM, SIGWINCH, SIGCHLD};
#define NCAUGHT ((int)(sizeof caught_signals / sizeof caught_signals[0]))
static struct sigaction g_old[NCAUGHT];      /* dispositions before the first catch */
static int g_installed[NCAUGHT];             /* did the first catch install a handler? */

static void on_signal(int sig) {
  int saved = errno;
  if (sig == SIGINT || sig == SIGTERM) {
    if (g_interrupts > 0) {                  /* the second interrupt: stop at once */
      struct sigaction dfl;
      memset(&dfl, 0, sizeof dfl);
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      sigaction(sig, &dfl, NULL);
      raise(sig);                            /* delivered when this handler returns */
    } else {
      g_first = sig;
    }
    g_interrupts = g_interrupts + 1;
  } else if (sig == SIGWINCH) {
    g_winch = g_winch + 1;
  }
  if (g_pipe[1] >= 0) {
    char c = (char)sig;
    ssize_t w = write(g_pipe[1], &c, 1);     /* full pipe: a wake-up is pending anyway */
    (void)w;
  }
  errno = saved;
}

static int set_flags(int fd) {
  int fl = fcntl(fd, F_GETFL);
  int fdfl = fcntl(fd, F_GETFD);
  if (fl < 0 || fdfl < 0) return -1;
  if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
  return fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC);
}

static void drain_pipe(void) {
  char buf[64];
  while (read(g_pipe[0], buf, sizeof buf) > 0) {}
}

int dl_signal_catch(dl_ctx *ctx) {
  if (g_catches > 0) {
    g_catches++;
    return 0;
  }
  if (g_pipe[0] < 0) {
    int p[2];
    if (pipe(p) < 0) {
      dl_fail(ctx, "cannot catch signals: %s (creating the wake-up pipe)", strerror(errno));
      return -1;
    }
    if (set_flags(p[0]) < 0 || set_flags(p[1]) < 0) {
      dl_fail(ctx, "cannot catch signals: %s (setting up the wake-up pipe)", strerror(errno));
      close(p[0]);
      close(p[1]);
      return -1;
    }
    g_pipe[0] = p[0];
    g_pipe[1] = p[1];
  }
  drain_pipe();                                /* wake-ups from an earlier catch are stale */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < NCAUGHT; i++) sigaddset(&sa.sa_mask, caught_signals[i]);
  for (int i = 0; i < NCAUGHT; i++) {
    int sig = caught_signals[i];
    g_installed[i] = 0;
    if (sigaction(sig, NULL, &g_old[i]) < 0) goto fail;
    if ((sig == SIGINT || sig == SIGTERM) && g_old[i].sa_handler == SIG_IGN) continue;  /* stays ignored */
    sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
    if (sigaction(sig, &sa, NULL) < 0) goto fail;
    g_installed[i] = 1;
  }
  g_catches = 1;
  return 0;
fail:
  dl_fail(ctx, "cannot catch signals: %s", strerror(errno));
  for (int i = 0; i < NCAUGHT; i++)
    if (g_installed[i]) sigaction(caught_signals[i], &g_old[i], NULL);
  return -1;
}

void dl_signal_release(void) {
  if (g_catches == 0) return;
  if (--g_catches > 0) return;
  for (int i = 0; i < NCAUGHT; i++)
    if (g_installed[i]) {
      sigaction(caught_signals[i], &g_old[i], NULL);
      g_installed[i] = 0;
    }
}

int dl_signal_caught(void) { return g_catches > 0; }

int dl_signal_pending(int *count) {
  if (count) *count = (int)g_interrupts;
  return (int)g_first;
}

void dl_signal_clear(void) {
  g_interrupts = 0;
  g_first = 0;
}

unsigned long dl_signal_winch_count(void) { return (unsigned long)g_winch; }

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* waits up to left_ns on the self-pipe (or nanosleep without a catch);
 * returns 1 if woken by a signal */
static int wait_some(int64_t left_ns) {
  if (g_catches > 0 && g_pipe[0] >= 0) {
    int64_t ms = (left_ns + 999999) / 1000000;
    struct pollfd p = {g_pipe[0], POLLIN, 0};
    int r = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
    if (r > 0) drain_pipe();
    return r != 0;                           /* an event, or EINTR */
  }
  struct timespec ts = {(time_t)(left_ns / 1000000000), (long)(left_ns % 1000000000)};
  return nanosleep(&ts, NULL) < 0 && errno == EINTR;
}

int dl_sleep(double seconds) {
  if (!(seconds > 0)) seconds = 0;
  if (seconds > 1e9) seconds = 1e9;
  int64_t deadline = now_ns() + (int64_t)(seconds * 1e9);
  for (;;) {
    if (g_catches > 0 && g_interrupts > 0) return 1;
    int64_t left = deadline - now_ns();
    if (left <= 0) return 0;
    wait_some(left);
  }
}

int dl_wait_event(double seconds) {
  if (!(seconds > 0)) seconds = 0;
  if (seconds > 1e9) seconds = 1e9;
  int64_t left = (int64_t)(seconds * 1e9);
  if (g_catches == 0) {
    wait_some(left);
    return 0;
  }
  return wait_some(left);
}

int dl_term_width(int fd) {
  struct winsize ws;
  if (!isatty(fd)) return 0;
  if (ioctl(fd, TIOCGWINSZ, &ws) < 0) return 0;
  return (int)ws.ws_col;
}

static const struct { const char *name; int sig; } signal_names[] = {
  {"SIGINT", SIGINT}, {"SIGTERM", SIGTERM}, {"SIGKILL", SIGKILL}, {"SIGHUP", SIGHUP},
  {"SIGQUIT", SIGQUIT}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGCONT", SIGCONT},
  {"SIGSTOP", SIGSTOP}, {"SIGWINCH", SIGWINCH}, {"SIGCHLD", SIGCHLD},
};
#define NNAMES ((int)(sizeof signal_names / sizeof signal_names[0]))

int dl_signal_number(const char *name) {
  if (!name) return 0;
  for (int i = 0; i < NNAMES; i++)
    if (strcmp(name, signal_names[i].name) == 0 || strcmp(name, signal_names[i].name + 3) == 0)
      return signal_names[i].sig;
  return 0;
}

const char *dl_signal_name(int sig) {
  for (int i = 0; i < NNAMES; i++)
    if (signal_names[i].sig == sig) return signal_names[i].name;
  return "SIG?";
}

/* ------------------------------------------------------------ processes */

dl_proc_opts dl_proc_defaults(void) {
  dl_proc_opts o;
  memset(&o, 0, sizeof o);
  o.new_group = 1;
  o.death_signal = SIGTERM;
  return o;
}

/* what the child reports through the exec pipe when it cannot exec */
enum { STAGE_STDIN = 1, STAGE_STDOUT, STAGE_STDERR, STAGE_CWD, STAGE_EXEC, STAGE_PARENT_GONE };
typedef struct { int stage, err; } child_report;

/* argv0 itself when it has a '/', else the first executable PATH entry
 * holding it; a new string (caller frees), or NULL with errno */
static char *resolve(const char *argv0) {
  if (strchr(argv0, '/')) return strdup(argv0);
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
  size_t n = strlen(argv0);
  for (const char *p = path;;) {
    const char *end = strchr(p, ':');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char *cand = malloc(len + n + 3);
    if (!cand) return NULL;
    if (len == 0) snprintf(cand, len + n + 3, "./%s", argv0);
    else snprintf(cand, len + n + 3, "%.*s/%s", (int)len, p, argv0);
    if (access(cand, X_OK) == 0) return cand;
    free(cand);
    if (!end) break;
    p = end + 1;
  }
  errno = ENOENT;
  return NULL;
}

/* the parent's environment with o->env entries set on top; a new array (caller frees) */
static char **build_env(const char *const *extra) {
  size_t n = 0, k = 0;
  while (environ && environ[n]) n++;
  while (extra && extra[k]) k++;
  char **env = malloc((n + k + 1) * sizeof *env);
  if (!env) return NULL;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    const char *eq = strchr(environ[i], '=');
    size_t klen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
    int replaced = 0;
    for (size_t j = 0; j < k; j++)
      if (strncmp(extra[j], environ[i], klen) == 0 && extra[j][klen] == '=') replaced = 1;
    if (!replaced) env[m++] = environ[i];
  }
  for (size_t j = 0; j < k; j++) env[m++] = (char *)extra[j];
  env[m] = NULL;
  return env;
}

static void child_fail(int fd, int stage) {
  child_report r = {stage, errno};
  ssize_t w = write(fd, &r, sizeof r);
  (void)w;
  _exit(127);
}

static int open_append(const char *path) {
  int fd;
  do fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0666); while (fd < 0 && errno == EINTR);
  return fd;
}

/* the child: only async-signal-safe calls from here to execve */
static void run_child(const dl_proc_opts *o, const char *path, char **env, int report_fd, pid_t parent) {
  if (o->new_group) setpgid(0, 0);
#ifdef __linux__
  if (o->death_signal) {
    prctl(PR_SET_PDEATHSIG, o->death_signal);
    if (getppid() != parent) {                 /* the parent died before the prctl */
      errno = ESRCH;
      child_fail(report_fd, STAGE_PARENT_GONE);
    }
  }
#else
  (void)parent;
#endif
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < 32; sig++)
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, NULL);
  int fd = open("/dev/null", O_RDONLY);
  if (fd < 0 || dup2(fd, 0) < 0) child_fail(report_fd, STAGE_STDIN);
  if (fd > 2) close(fd);
  if (o->stdout_path) {
    fd = open_append(o->stdout_path);
    if (fd < 0 || dup2(fd, 1) < 0) child_fail(report_fd, STAGE_STDOUT);
    if (fd > 2) close(fd);
  }
  if (o->stderr_to_stdout) {
    if (dup2(1, 2) < 0) child_fail(report_fd, STAGE_STDERR);
  } else if (o->stderr_path) {
    fd = open_append(o->stderr_path);
    if (fd < 0 || dup2(fd, 2) < 0) child_fail(report_fd, STAGE_STDERR);
    if (fd > 2) close(fd);
  }
  if (o->cwd && chdir(o->cwd) < 0) child_fail(report_fd, STAGE_CWD);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execve(path, (char *const *)o->argv, env);
  child_fail(report_fd, STAGE_EXEC);
}

long dl_proc_spawn(dl_ctx *ctx, const dl_proc_opts *o) {
  if (!o || !o->argv || !o->argv[0] || !o->argv[0][0]) {
    dl_fail(ctx, "cannot start a process: no program given");
    return -1;
  }
  const char *name = o->argv[0];
  char *path = resolve(name);
  if (!path) {
    dl_fail(ctx, "cannot start '%s': %s", name, errno == ENOENT ? "not found in PATH" : strerror(errno));
    return -1;
  }
  char **env = build_env(o->env);
  int rp[2] = {-1, -1};
  if (!env) {
    dl_fail(ctx, "cannot start '%s': out of memory", name);
    free(path);
    return -1;
  }
  if (pipe(rp) < 0 || fcntl(rp[0], F_SETFD, FD_CLOEXEC) < 0 || fcntl(rp[1], F_SETFD, FD_CLOEXEC) < 0) {
    dl_fail(ctx, "cannot start '%s': %s (creating the exec pipe)", name, strerror(errno));
    if (rp[0] >= 0) { close(rp[0]); close(rp[1]); }
    free(env);
    free(path);
    return -1;
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);   /* no handler of ours runs in the child */
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    close(rp[0]);
    run_child(o, path, env, rp[1], parent);
  }
  int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  close(rp[1]);
  free(env);
  long rc = pid;
  if (pid < 0) {
    dl_fail(ctx, "cannot start '%s': %s (fork)", name, strerror(fork_errno));
    rc = -1;
  } else {
    if (o->new_group) setpgid(pid, pid);      /* both sides set it: no window where a signal misses */
    child_report r;
    ssize_t n;
    do n = read(rp[0], &r, sizeof r); while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof r) {              /* the exec failed: reap the child, report why */
      int st;
      while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
      const char *why = strerror(r.err);
      switch (r.stage) {
        case STAGE_STDOUT: dl_fail(ctx, "cannot start '%s': cannot open '%s': %s", name, o->stdout_path, why); break;
        case STAGE_STDERR:
          dl_fail(ctx, "cannot start '%s': cannot open '%s': %s", name,
                  o->stderr_path ? o->stderr_path : "stdout", why);
          break;
        case STAGE_STDIN: dl_fail(ctx, "cannot start '%s': cannot open '/dev/null': %s", name, why); break;
        case STAGE_CWD: dl_fail(ctx, "cannot start '%s': cannot change to directory '%s': %s", name, o->cwd, why); break;
        case STAGE_PARENT_GONE: dl_fail(ctx, "cannot start '%s': the parent process ended", name); break;
        default: dl_fail(ctx, "cannot start '%s': %s", name, why); break;
      }
      rc = -1;
    }
  }
  close(rp[0]);
  free(path);
  return rc;
}

int dl_proc_poll(dl_ctx *ctx, long pid, int wait, int *code, int *sig) {
  int st = 0;
  pid_t r;
  if (pid <= 0) {
    dl_fail(ctx, "cannot wait for process %ld: not a process id", pid);
    return -1;
  }
  do r = waitpid((pid_t)pid, &st, wait ? 0 : WNOHANG); while (r < 0 && errno == EINTR);
  if (r == 0) return 0;
  if (r < 0) {
    dl_fail(ctx, "cannot wait for process %ld: %s", pid,
            errno == ECHILD ? "not a child of this process (or reaped already)" : strerror(errno));
    return -1;
  }
  if (WIFSIGNALED(st)) {
    *sig = WTERMSIG(st);
    *code = 128 + *sig;
  } else {
    *sig = 0;
    *code = WIFEXITED(st) ? WEXITSTATUS(st) : 255;
  }
  return 1;
}

int dl_proc_signal(dl_ctx *ctx, long pid, int sig, int group) {
  if (pid <= 0) {
    dl_fail(ctx, "cannot signal process %ld: not a process id", pid);
    return -1;
  }
  int r = group ? kill(-(pid_t)pid, sig) : kill((pid_t)pid, sig);
  if (r < 0 && errno != ESRCH) {
    dl_fail(ctx, "cannot signal process %ld: %s", pid, strerror(errno));
    return -1;
  }
  return 0;
}

int dl_proc_alive(long pid) {
  if (pid <= 0) return 0;
  return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

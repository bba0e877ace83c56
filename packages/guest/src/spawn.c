/* Starting an EXEC's process: its environment, a pty or pipes for its stdio, and the child
 * itself, cloned with CLONE_VM | CLONE_VFORK (no page tables copied) and exec'd. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "proto.h"
#include "spawn.h"

static char *kv(const char *k, const char *v) {
  size_t n = strlen(k) + strlen(v) + 2;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s=%s", k, v);
  return s;
}

/* Default environment (plus TERM on a pty), then the request's K=V entries replacing
 * same-named ones. */
static char **build_env(const struct user_info *u, char **extra, int pty) {
  size_t n = pty ? 5 : 4, cap = 6;
  for (char **e = extra; e && *e; e++) cap++;
  char **env = calloc(cap, sizeof *env);
  if (!env) return NULL;
  env[0] = kv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  env[1] = kv("HOME", u->home);
  env[2] = kv("USER", u->name);
  env[3] = kv("LANG", "C.UTF-8");
  if (pty) env[4] = kv("TERM", "xterm-256color");
  for (char **e = extra; e && *e; e++) {
    size_t klen = strcspn(*e, "=");
    size_t i;
    for (i = 0; i < n; i++)
      if (env[i] && strncmp(env[i], *e, klen) == 0 && env[i][klen] == '=') break;
    char *dup = strdup(*e);
    if (i < n) { free(env[i]); env[i] = dup; }
    else env[n++] = dup;
  }
  return env;
}

static void free_env(char **env) {
  for (char **e = env; e && *e; e++) free(*e);
  free(env);
}

/* execve, and for a file the kernel cannot run (ENOEXEC: a script without #!) the shell on it,
 * as execvp does. Returns only on failure, errno set. */
static void exec_file(const char *file, char **argv, char **env) {
  execve(file, argv, env);
  if (errno != ENOEXEC) return;
  size_t n = 0;
  while (argv[n]) n++;
  char *sh[n + 2];
  sh[0] = "sh";
  sh[1] = (char *)file;
  for (size_t i = 1; i <= n; i++) sh[i + 1] = argv[i];
  execve("/bin/sh", sh, env);
  errno = ENOEXEC;
}

/* execvp with the PATH of the child's own environment (not the agent's), without malloc:
 * argv[0] with a slash is exec'd directly. Returns only on failure, errno set. */
static void exec_path(char **argv, char **env) {
  const char *file = argv[0];
  if (strchr(file, '/')) {
    exec_file(file, argv, env);
    return;
  }
  const char *path = "/usr/local/bin:/usr/bin:/bin";
  for (char **e = env; *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0) { path = *e + 5; break; }
  size_t fl = strlen(file);
  int eacces = 0;
  char buf[4096];
  for (const char *p = path;; p++) {
    const char *c = strchrnul(p, ':');
    size_t dl = (size_t)(c - p);
    if (dl + fl + 2 <= sizeof buf) {
      memcpy(buf, p, dl);
      if (dl) buf[dl++] = '/';
      memcpy(buf + dl, file, fl + 1);
      /* A failed execve still builds a whole new address space (and copies argv and env into
       * it) before it looks for the file: under TCG about 0.4 ms per PATH entry. Skip the
       * entries that do not hold the file; execve decides for the rest, errno as before. */
      struct stat st;
      if (stat(buf, &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) exec_file(buf, argv, env);
      if (errno == EACCES) eacces = 1;
      else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV &&
               errno != ETIMEDOUT)
        return;
    }
    if (!*c) break;
    p = c;
  }
  errno = eacces ? EACCES : ENOENT;
}

static int child(void *arg) {
  struct spawn *sp = arg;
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  signal(SIGPIPE, SIG_DFL); /* the handler table is the child's own (no CLONE_SIGHAND) */
  setsid();
  if (sp->pty) { /* the slave becomes our controlling terminal, owned by the user like login does */
    ioctl(sp->in, TIOCSCTTY, 0);
    if (fchown(sp->in, sp->u->uid, (gid_t)-1)) {}
  }
  dup2(sp->in, 0); dup2(sp->out, 1); dup2(sp->err, 2);
  umask(022);
  int stage = ST_CWD;
  const char *cwd = sp->r->cwd ? sp->r->cwd : sp->u->home;
  if (chdir(cwd) < 0 && (sp->r->cwd || chdir("/") < 0)) goto fail;
  stage = ST_CRED;
  if (setgroups((size_t)sp->u->ngroups, sp->u->groups) < 0 || setgid(sp->u->gid) < 0 ||
      setuid(sp->u->uid) < 0)
    goto fail;
  stage = ST_EXEC;
  exec_path(sp->argv, sp->env);
fail:
  sp->errnum = errno;
  sp->stage = stage;
  _exit(sp->errnum == ENOENT ? 127 : 126);
}

#define PIPE_BYTES (1 << 20) /* lets a child run ahead of the agent (see HOLD_US in exec.c) */

/* A new pty: the slave for the child (its stdin, stdout, stderr and controlling terminal);
 * the master carries the output (keep[0]) and a dup of it the input (keep[2]). */
static int open_pty(const struct req *r, struct spawn *sp, int keep[3]) {
  char name[64];
  struct winsize ws = {.ws_row = winsize_of(r->has_rows, r->rows, 24),
                       .ws_col = winsize_of(r->has_cols, r->cols, 80)};
  if ((keep[0] = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 || unlockpt(keep[0]) < 0 ||
      ptsname_r(keep[0], name, sizeof name) != 0 ||
      (sp->in = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 ||
      ioctl(keep[0], TIOCSWINSZ, &ws) < 0 || (keep[2] = fcntl(keep[0], F_DUPFD_CLOEXEC, 0)) < 0)
    return errno;
  sp->out = sp->err = sp->in;
  sp->pty = 1;
  return 0;
}

/* Pipes for stdout and stderr, and one for stdin (FLAG_STDIN) or /dev/null. */
static int open_pipes(const struct req *r, struct spawn *sp, int keep[3]) {
  int p[2];
  if (pipe2(p, O_CLOEXEC)) return errno;
  keep[0] = p[0]; sp->out = p[1];
  if (pipe2(p, O_CLOEXEC)) return errno;
  keep[1] = p[0]; sp->err = p[1];
  if (r->flags & FLAG_STDIN) {
    if (pipe2(p, O_CLOEXEC)) return errno;
    sp->in = p[0]; keep[2] = p[1];
  } else if ((sp->in = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
    return errno;
  }
  fcntl(keep[0], F_SETPIPE_SZ, PIPE_BYTES); /* best effort: the default 64 KiB still works */
  fcntl(keep[1], F_SETPIPE_SZ, PIPE_BYTES);
  return 0;
}

void close_all(int *fds, int n) {
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
}

int spawn_start(const struct req *r, char **argv, const struct user_info *u, struct spawn *sp,
                int keep[3], pid_t *pid) {
  *sp = (struct spawn){.r = r, .argv = argv, .u = u, .in = -1, .out = -1, .err = -1};
  keep[0] = keep[1] = keep[2] = -1;
  sp->env = build_env(u, r->env, (r->flags & FLAG_PTY) != 0);
  int e = !sp->env ? ENOMEM : (r->flags & FLAG_PTY) ? open_pty(r, sp, keep) : open_pipes(r, sp, keep);
  if (!e) {
    static char stack[64 * 1024] __attribute__((aligned(16)));
    *pid = clone(child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, sp);
    if (*pid < 0) e = errno;
  }
  free_env(sp->env);
  sp->env = NULL;
  int theirs[3] = {sp->in, sp->out, sp->err};
  if (sp->pty) theirs[1] = theirs[2] = -1; /* one slave fd */
  close_all(theirs, 3);
  if (e) close_all(keep, 3);
  return e;
}

/* EXEC streams: spawn a child in its own session (clone with CLONE_VM | CLONE_VFORK, then
 * execve), pump its pipes or pty within the host's credit in large frames, and report EXIT
 * once it was reaped and its output was drained. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "proto.h"

#define CHUNK 65536
#define FRAME_OUT (256u * 1024u) /* largest STDOUT/STDERR frame */
/* A pipe read smaller than this means the child writes in small pieces: leave its pipe alone
 * for HOLD_US so the next read takes many of them at once (fewer wakeups and frames). */
#define HOLD_BELOW (64u * 1024u)
#define HOLD_US 2000

enum stage { ST_CWD = 1, ST_CRED = 2, ST_EXEC = 3 };

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

/* What the child needs. It runs on its own stack but in the agent's memory (CLONE_VM |
 * CLONE_VFORK: no page tables copied, the agent waits until it exec'd or exited), so it
 * reports a failure by writing stage and err here before _exit, and touches nothing else. */
struct spawn {
  const struct req *r;
  char **argv, **env;
  const struct user_info *u;
  int in, out, err, pty; /* the child's 0, 1, 2; pty: `in` is the slave */
  int stage, errnum;     /* set by the child on failure */
};

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
      exec_file(buf, argv, env);
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

/* After a pty child exited, its last output may still be in the line discipline: read the
 * master until EIO (every slave closed), or until this long when a background job holds it. */
#define PTY_DRAIN_MS 500
#define PIPE_BYTES (1 << 20) /* lets a child run ahead of the agent (see HOLD_US in agent.c) */

static unsigned short winsize_of(int has, uint32_t v, unsigned short dflt) {
  return has && v > 0 && v <= 0xffff ? (unsigned short)v : dflt;
}

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

static void close_all(int *fds, int n) {
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
}

/* The common tail of both kinds: a setup failure before exec is a request error; otherwise
 * the stream starts (STARTED), and an exec failure is shown as output before the child's
 * 127/126 exit arrives. */
static void spawn_tail(uint32_t id, const struct req *r, struct spawn *sp, pid_t pid, int keep[3]) {
  if (sp->stage && sp->stage != ST_EXEC) {
    waitpid(pid, NULL, 0);
    close_all(keep, 3);
    send_error(id, sp->errnum, sp->stage == ST_CWD ? "cannot change to the working directory"
                                                   : "cannot switch to the user");
    return;
  }
  struct stream *s = stream_new(id, S_EXEC);
  if (!s) { kill(pid, SIGKILL); close_all(keep, 3); return; }
  s->pid = pid;
  s->pty = sp->pty;
  s->out_fd = keep[0];
  s->err_fd = keep[1];
  s->in_fd = keep[2]; /* pty: a dup of the master, same open file: O_NONBLOCK covers both */
  for (int i = 0; i < 3; i++)
    if (keep[i] >= 0) fcntl(keep[i], F_SETFL, O_NONBLOCK);
  if (r->has_timeout && r->timeout_ms) s->deadline_ms = now_ms() + r->timeout_ms;
  struct jbuf j;
  jb_init(&j);
  jb_lit(&j, "{\"pid\":"); jb_int(&j, pid); jb_lit(&j, "}");
  send_json(T_STARTED, id, &j);
  if (sp->stage == ST_EXEC) { /* the terminal or stderr shows why */
    char msg[512];
    int k = snprintf(msg, sizeof msg, "sandtree: %s: %s%s", sp->argv[0], strerror(sp->errnum),
                     sp->pty ? "\r\n" : "\n");
    if (k > (int)sizeof msg - 1) k = (int)sizeof msg - 1;
    send_frame(sp->pty ? T_STDOUT : T_STDERR, id, msg, (size_t)k);
    s->credit = s->credit > (uint64_t)k ? s->credit - (uint64_t)k : 0;
  }
}

/* SIGKILL on a pty ends the whole session (the shell and every job it started: a hangup that
 * cannot be ignored). Other signals go to the terminal's foreground group, as if typed. */
static void pty_signal(struct stream *s, int sig) {
  if (sig == SIGKILL) {
    kill(-s->pid, SIGKILL);
    DIR *d = opendir("/proc");
    for (struct dirent *e; d && (e = readdir(d));) {
      pid_t p = (pid_t)atoi(e->d_name);
      if (p > 1 && getsid(p) == s->pid) kill(p, SIGKILL);
    }
    if (d) closedir(d);
    return;
  }
  int fd = s->out_fd >= 0 ? s->out_fd : s->in_fd;
  pid_t pg = fd >= 0 ? tcgetpgrp(fd) : -1;
  kill(pg > 0 ? -pg : -s->pid, sig);
}

static void pty_frame(struct stream *s, uint8_t type, const uint8_t *p, size_t n) {
  int fd = s->out_fd >= 0 ? s->out_fd : s->in_fd;
  struct req r;
  if (type == T_RESIZE && fd >= 0 && req_decode(p, n, &r) == 0) {
    struct winsize ws;
    if (r.has_rows && r.has_cols && ioctl(fd, TIOCGWINSZ, &ws) == 0) {
      ws.ws_row = winsize_of(1, r.rows, ws.ws_row);
      ws.ws_col = winsize_of(1, r.cols, ws.ws_col);
      ioctl(fd, TIOCSWINSZ, &ws); /* the foreground group gets SIGWINCH */
    }
    req_free(&r);
  } else if (type == T_STDIN_CLOSE && s->in_fd >= 0 && !s->in_close) {
    /* A terminal has no end of its input: type the EOF character (^D) instead. Its WINDOW
     * grants the host one byte it never sent, which is harmless. */
    struct termios t;
    uint8_t eof = 4;
    if (tcgetattr(s->in_fd, &t) == 0 && t.c_cc[VEOF]) eof = t.c_cc[VEOF];
    exec_frame(s, T_STDIN, &eof, 1);
  }
}

void exec_start(uint32_t id, struct req *r) {
  char *shv[] = {"/bin/sh", "-c", r->shell, NULL};
  char **argv = r->shell ? shv : r->argv;
  if (!argv || !argv[0]) { send_error(id, EINVAL, "EXEC needs ARG or SHELL"); return; }
  struct user_info u;
  int e = user_lookup(r->user ? r->user : "0", &u);
  if (e) { send_error(id, e, "unknown user"); return; }
  struct spawn sp = {.r = r, .argv = argv, .u = &u, .in = -1, .out = -1, .err = -1};
  int keep[3] = {-1, -1, -1}; /* the agent's ends: output, stderr, input */
  sp.env = build_env(&u, r->env, (r->flags & FLAG_PTY) != 0);
  e = !sp.env ? ENOMEM : (r->flags & FLAG_PTY) ? open_pty(r, &sp, keep) : open_pipes(r, &sp, keep);
  pid_t pid = -1;
  if (!e) {
    static char stack[64 * 1024] __attribute__((aligned(16)));
    pid = clone(child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &sp);
    if (pid < 0) e = errno;
  }
  free_env(sp.env);
  int theirs[3] = {sp.in, sp.out, sp.err};
  if (sp.pty) theirs[1] = theirs[2] = -1; /* one slave fd */
  close_all(theirs, 3);
  if (e) { close_all(keep, 3); send_error(id, e, NULL); return; }
  spawn_tail(id, r, &sp, pid, keep);
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

void exec_detach(struct stream *s) {
  s->detached = 1;
  close_fd(&s->in_fd);
  free(s->inbuf);
  s->inbuf = NULL;
  s->in_len = s->in_cap = 0;
}

void exec_frame(struct stream *s, uint8_t type, const uint8_t *p, size_t n) {
  if (s->pty && (type == T_RESIZE || type == T_STDIN_CLOSE)) pty_frame(s, type, p, n);
  if (type == T_STDIN) {
    if (s->in_fd < 0 || s->in_close) { if (n) send_window(s->id, (uint32_t)n); return; }
    if (s->in_len + n > s->in_cap) {
      size_t cap = s->in_cap ? s->in_cap : 65536;
      while (cap < s->in_len + n) cap *= 2;
      uint8_t *b = realloc(s->inbuf, cap);
      if (!b) { send_window(s->id, (uint32_t)n); return; }
      s->inbuf = b;
      s->in_cap = cap;
    }
    memcpy(s->inbuf + s->in_len, p, n);
    s->in_len += n;
  } else if (type == T_STDIN_CLOSE) {
    s->in_close = 1;
    if (!s->in_len) close_fd(&s->in_fd);
  } else if (type == T_SIGNAL) {
    struct req r;
    if (req_decode(p, n, &r) == 0) {
      if (r.has_signum && r.signum < 65 && !s->exited) {
        if (s->pty) pty_signal(s, (int)r.signum);
        else kill(-s->pid, (int)r.signum);
      }
      req_free(&r);
    }
  }
}

void exec_reaped(pid_t pid, int status) {
  for (struct stream *s = g_streams; s; s = s->next)
    if (s->kind == S_EXEC && !s->dead && !s->exited && s->pid == pid) {
      s->exited = 1;
      s->status = status;
      if (s->pty) s->drain_ms = now_ms() + PTY_DRAIN_MS;
      return;
    }
}

/* Reads what a child pipe holds (up to FRAME_OUT) into one STDOUT/STDERR frame. Returns 1
 * if more may follow, 0 at EOF/EAGAIN (fd closed on EOF), -1 when out of credit or queue room. */
static int pump_out(struct stream *s, int *fd, uint8_t type) {
  if (*fd < 0) return 0;
  if (s->detached) {
    static uint8_t sink[CHUNK];
    ssize_t r = read(*fd, sink, sizeof sink);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) close_fd(fd);
    return r > 0;
  }
  if (!s->credit || !outq_room()) return -1;
  size_t max = s->credit < FRAME_OUT ? (size_t)s->credit : FRAME_OUT;
  ssize_t r = send_read(type, s->id, *fd, max);
  if (r > 0) {
    s->credit -= (uint64_t)r;
    if (!s->pty && !s->exited && (size_t)r < HOLD_BELOW) s->hold_us = now_us() + HOLD_US;
    return 1;
  }
  if (r == 0 || (errno != EAGAIN && errno != EINTR)) close_fd(fd);
  return 0;
}

static void pump_in(struct stream *s) {
  if (s->in_len) {
    ssize_t w = write(s->in_fd, s->inbuf, s->in_len);
    size_t done = 0;
    if (w > 0) done = (size_t)w;
    else if (w < 0 && errno != EAGAIN && errno != EINTR) { /* reader gone: drop the rest */
      done = s->in_len;
      close_fd(&s->in_fd);
    }
    if (done) {
      memmove(s->inbuf, s->inbuf + done, s->in_len - done);
      s->in_len -= done;
      if (!s->detached) send_window(s->id, (uint32_t)done);
    }
  }
  if (!s->in_len && s->in_close) close_fd(&s->in_fd);
}

void exec_pump(struct stream *s, int fd, short revents) {
  (void)revents;
  if (fd == s->in_fd) pump_in(s);
  else if (fd == s->out_fd) pump_out(s, &s->out_fd, T_STDOUT);
  else if (fd == s->err_fd) pump_out(s, &s->err_fd, T_STDERR);
}

static void send_exit(struct stream *s) {
  struct jbuf j;
  jb_init(&j);
  int code = 0, sig = 0;
  if (WIFEXITED(s->status)) code = WEXITSTATUS(s->status);
  else if (WIFSIGNALED(s->status)) { sig = WTERMSIG(s->status); code = 128 + sig; }
  if (s->timed_out) code = 124;
  jb_lit(&j, "{\"exit_code\":"); jb_int(&j, code);
  jb_lit(&j, ",\"signal\":");
  if (sig) jb_int(&j, sig); else jb_lit(&j, "null");
  jb_lit(&j, s->timed_out ? ",\"timed_out\":true}" : ",\"timed_out\":false}");
  send_json(T_EXIT, s->id, &j);
}

void exec_tick(struct stream *s, uint64_t now) {
  if (!s->exited) {
    if (s->deadline_ms && now >= s->deadline_ms) {
      if (s->pty) pty_signal(s, SIGKILL);
      else kill(-s->pid, SIGKILL);
      s->timed_out = 1;
      s->deadline_ms = 0;
    }
    return;
  }
  /* Exited: drain each pipe until it is empty (EAGAIN) or closed. A background grandchild
   * that still holds the pipe open does not delay EXIT past that point. */
  int r1, r2;
  while ((r1 = pump_out(s, &s->out_fd, T_STDOUT)) == 1) {}
  while ((r2 = pump_out(s, &s->err_fd, T_STDERR)) == 1) {}
  if (r1 < 0 || r2 < 0) return; /* wait for WINDOW */
  if (s->pty && s->out_fd >= 0 && now < s->drain_ms) return; /* until EIO, see PTY_DRAIN_MS */
  close_fd(&s->out_fd);
  close_fd(&s->err_fd);
  if (!s->detached) send_exit(s);
  stream_end(s);
}

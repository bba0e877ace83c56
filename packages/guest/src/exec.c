/* EXEC streams: fork/exec a child in its own session, pump its pipes within the host's
 * credit, and report EXIT once it was reaped and its pipes were drained. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
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

extern char **environ;

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

/* Runs in the child after fork(): never returns. Failures travel over errfd as
 * {stage, errno}; the pipe is CLOEXEC, so a successful exec closes it with no bytes. */
static void child(struct req *r, char **argv, char **env, const struct user_info *u,
                  int in, int out, int err, int errfd, int pty) {
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  signal(SIGPIPE, SIG_DFL);
  setsid();
  if (pty) { /* the slave becomes our controlling terminal, owned by the user like login does */
    ioctl(in, TIOCSCTTY, 0);
    if (fchown(in, u->uid, (gid_t)-1)) {}
  }
  dup2(in, 0); dup2(out, 1); dup2(err, 2);
  umask(022);
  int rep[2] = {ST_CWD, 0};
  const char *cwd = r->cwd ? r->cwd : u->home;
  if (chdir(cwd) < 0 && (r->cwd || chdir("/") < 0)) goto fail;
  rep[0] = ST_CRED;
  if (setgroups((size_t)u->ngroups, u->groups) < 0 || setgid(u->gid) < 0 || setuid(u->uid) < 0)
    goto fail;
  rep[0] = ST_EXEC;
  environ = env;
  execvp(argv[0], argv);
fail:
  rep[1] = errno;
  if (write(errfd, rep, sizeof rep) < 0) {}
  _exit(rep[1] == ENOENT ? 127 : 126);
}

static int cloexec_pipe(int p[2]) { return pipe2(p, O_CLOEXEC); }

/* After a pty child exited, its last output may still be in the line discipline: read the
 * master until EIO (every slave closed), or until this long when a background job holds it. */
#define PTY_DRAIN_MS 500

static unsigned short winsize_of(int has, uint32_t v, unsigned short dflt) {
  return has && v > 0 && v <= 0xffff ? (unsigned short)v : dflt;
}

/* EXEC with FLAG_PTY: the child gets the slave of a new pty as stdin, stdout, stderr and
 * controlling terminal; the master carries its output (STDOUT) and its input (STDIN). */
static void exec_start_pty(uint32_t id, struct req *r, char **argv, const struct user_info *u) {
  char **env = build_env(u, r->env, 1);
  int m = -1, m2 = -1, sl = -1, px[2] = {-1, -1}, e = 0;
  char name[64];
  struct winsize ws = {.ws_row = winsize_of(r->has_rows, r->rows, 24),
                       .ws_col = winsize_of(r->has_cols, r->cols, 80)};
  if (!env || (m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 || unlockpt(m) < 0 ||
      ptsname_r(m, name, sizeof name) != 0 ||
      (sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 || ioctl(m, TIOCSWINSZ, &ws) < 0 ||
      (m2 = fcntl(m, F_DUPFD_CLOEXEC, 0)) < 0 || cloexec_pipe(px)) {
    e = errno;
    goto fail;
  }
  pid_t pid = fork();
  if (pid < 0) { e = errno; goto fail; }
  if (pid == 0) child(r, argv, env, u, sl, sl, sl, px[1], 1);
  free_env(env);
  env = NULL;
  close(sl); close(px[1]);
  int rep[2] = {0, 0};
  ssize_t n;
  do n = read(px[0], rep, sizeof rep); while (n < 0 && errno == EINTR);
  close(px[0]);
  if (n == (ssize_t)sizeof rep && rep[0] != ST_EXEC) {
    waitpid(pid, NULL, 0);
    close(m); close(m2);
    send_error(id, rep[1], rep[0] == ST_CWD ? "cannot change to the working directory"
                                            : "cannot switch to the user");
    return;
  }
  struct stream *s = stream_new(id, S_EXEC);
  if (!s) { kill(pid, SIGKILL); close(m); close(m2); return; }
  s->pid = pid;
  s->pty = 1;
  s->out_fd = m;
  s->in_fd = m2; /* same open file: O_NONBLOCK below covers both */
  fcntl(m, F_SETFL, O_NONBLOCK);
  if (r->has_timeout && r->timeout_ms) s->deadline_ms = now_ms() + r->timeout_ms;
  struct jbuf j;
  jb_init(&j);
  jb_lit(&j, "{\"pid\":"); jb_int(&j, pid); jb_lit(&j, "}");
  send_json(T_STARTED, id, &j);
  if (n == (ssize_t)sizeof rep) { /* exec failed: the terminal shows why, the child exits 127/126 */
    char msg[512];
    int k = snprintf(msg, sizeof msg, "sandtree: %s: %s\r\n", argv[0], strerror(rep[1]));
    if (k > (int)sizeof msg - 1) k = (int)sizeof msg - 1;
    send_frame(T_STDOUT, id, msg, (size_t)k);
    s->credit = s->credit > (uint64_t)k ? s->credit - (uint64_t)k : 0;
  }
  return;
fail:
  free_env(env);
  int fds[] = {m, m2, sl, px[0], px[1]};
  for (int i = 0; i < 5; i++) if (fds[i] >= 0) close(fds[i]);
  send_error(id, e ? e : ENOMEM, NULL);
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
  if (r->flags & FLAG_PTY) { exec_start_pty(id, r, argv, &u); return; }
  char **env = build_env(&u, r->env, 0);
  int po[2] = {-1, -1}, pe[2] = {-1, -1}, pi[2] = {-1, -1}, px[2] = {-1, -1};
  if (!env || cloexec_pipe(po) || cloexec_pipe(pe) || cloexec_pipe(px) ||
      ((r->flags & FLAG_STDIN) ? cloexec_pipe(pi)
                               : ((pi[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0))) {
    e = errno;
    goto fail;
  }
  pid_t pid = fork();
  if (pid < 0) { e = errno; goto fail; }
  if (pid == 0) child(r, argv, env, &u, pi[0], po[1], pe[1], px[1], 0);
  free_env(env);
  env = NULL;
  close(po[1]); close(pe[1]); close(pi[0]); close(px[1]);
  int rep[2] = {0, 0};
  ssize_t n;
  do n = read(px[0], rep, sizeof rep); while (n < 0 && errno == EINTR);
  close(px[0]);
  if (n == (ssize_t)sizeof rep && rep[0] != ST_EXEC) {
    /* Setup failed before exec: a request error, not a program exit. */
    waitpid(pid, NULL, 0);
    close(po[0]); close(pe[0]);
    if (pi[1] >= 0) close(pi[1]);
    send_error(id, rep[1], rep[0] == ST_CWD ? "cannot change to the working directory"
                                            : "cannot switch to the user");
    return;
  }
  struct stream *s = stream_new(id, S_EXEC);
  if (!s) { kill(pid, SIGKILL); close(po[0]); close(pe[0]); if (pi[1] >= 0) close(pi[1]); return; }
  s->pid = pid;
  s->out_fd = po[0];
  s->err_fd = pe[0];
  s->in_fd = pi[1];
  fcntl(po[0], F_SETFL, O_NONBLOCK);
  fcntl(pe[0], F_SETFL, O_NONBLOCK);
  if (pi[1] >= 0) fcntl(pi[1], F_SETFL, O_NONBLOCK);
  if (r->has_timeout && r->timeout_ms) s->deadline_ms = now_ms() + r->timeout_ms;
  struct jbuf j;
  jb_init(&j);
  jb_lit(&j, "{\"pid\":"); jb_int(&j, pid); jb_lit(&j, "}");
  send_json(T_STARTED, id, &j);
  if (n == (ssize_t)sizeof rep) { /* exec failed: the child exits 127/126 */
    char msg[512];
    int m = snprintf(msg, sizeof msg, "sandtree: %s: %s\n", argv[0], strerror(rep[1]));
    if (m > (int)sizeof msg - 1) m = (int)sizeof msg - 1;
    send_frame(T_STDERR, id, msg, (size_t)m);
    s->credit = s->credit > (uint64_t)m ? s->credit - (uint64_t)m : 0;
  }
  return;
fail:
  free_env(env);
  int *fds[] = {po, pe, pi, px};
  for (int i = 0; i < 4; i++) for (int k = 0; k < 2; k++) if (fds[i][k] >= 0) close(fds[i][k]);
  send_error(id, e ? e : ENOMEM, NULL);
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

/* One read from a child pipe into a STDOUT/STDERR frame. Returns 1 if more may follow,
 * 0 at EOF/EAGAIN (fd closed on EOF), -1 when out of credit or queue room. */
static int pump_out(struct stream *s, int *fd, uint8_t type) {
  if (*fd < 0) return 0;
  if (s->detached) {
    static uint8_t sink[CHUNK];
    ssize_t r = read(*fd, sink, sizeof sink);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) close_fd(fd);
    return r > 0;
  }
  if (!s->credit || !outq_room()) return -1;
  size_t max = s->credit < CHUNK ? (size_t)s->credit : CHUNK;
  ssize_t r = send_read(type, s->id, *fd, max);
  if (r > 0) { s->credit -= (uint64_t)r; return 1; }
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

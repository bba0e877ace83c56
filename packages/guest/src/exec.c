/* EXEC streams: start a child in its own session (spawn.c), pump its pipes or pty within the
 * host's credit in large frames, and report EXIT once it was reaped and its output was drained. */
#include <errno.h>
#include <fcntl.h>
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
#include "spawn.h"

#define CHUNK 65536
#define FRAME_OUT (256u * 1024u) /* largest STDOUT/STDERR frame */
/* A pipe read smaller than this means the child writes in small pieces: leave its pipe alone
 * for HOLD_US so the next read takes many of them at once (fewer wakeups and frames). */
#define HOLD_BELOW (64u * 1024u)
#define HOLD_US 2000

/* After a pty child exited, its last output may still be in the line discipline: read the
 * master until EIO (every slave closed), or until this long when a background job holds it. */
#define PTY_DRAIN_MS 500

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
  struct spawn sp;
  int keep[3];
  pid_t pid;
  e = spawn_start(r, argv, &u, &sp, keep, &pid);
  if (e) { send_error(id, e, NULL); return; }
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

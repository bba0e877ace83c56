/* sandtree guest agent: PID 1 of the microVM. Boots the root (init.c), then serves the host
 * protocol (docs/protocol.md) over the virtio-serial port named "agent" in one poll() loop. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "outq.h"
#include "proto.h"

struct stream *g_streams;
static int serial_fd = -1, connected;
static struct frame_parser parser;

void agent_log(const char *fmt, ...) {
  char b[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b, sizeof b - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > (int)sizeof b - 2) n = sizeof b - 2;
  b[n++] = '\n';
  if (write(2, "sandtree-agent: ", 16) < 0 || write(2, b, (size_t)n) < 0) return;
}

uint64_t now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000 + (uint64_t)t.tv_nsec / 1000;
}

uint64_t now_ms(void) { return now_us() / 1000; }

struct stream *stream_new(uint32_t id, enum stream_kind kind) {
  struct stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->id = id;
  s->kind = kind;
  s->credit = INITIAL_CREDIT;
  s->out_fd = s->err_fd = s->in_fd = s->fd = -1;
  s->next = g_streams;
  g_streams = s;
  return s;
}

static void closefd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

void stream_end(struct stream *s) {
  s->dead = 1;
  closefd(&s->out_fd); closefd(&s->err_fd); closefd(&s->in_fd); closefd(&s->fd);
  if (s->dir) closedir(s->dir);
  s->dir = NULL;
  free(s->inbuf);
  s->inbuf = NULL;
  s->in_len = s->in_cap = 0;
}

static struct stream *stream_find(uint32_t id) {
  for (struct stream *s = g_streams; s; s = s->next)
    if (s->id == id && !s->dead && !s->detached) return s;
  return NULL;
}

static void sweep(void) {
  for (struct stream **pp = &g_streams; *pp;) {
    struct stream *s = *pp;
    if (s->dead) { *pp = s->next; free(s); }
    else pp = &s->next;
  }
}

void send_json(uint8_t type, uint32_t stream, struct jbuf *j) {
  send_frame(type, stream, j->p, j->len);
  jb_free(j);
}

void send_window(uint32_t stream, uint32_t n) {
  uint8_t b[4];
  wr32(b, n);
  send_frame(T_WINDOW, stream, b, 4);
}

static const struct { int e; const char *n; } errnames[] = {
  {EPERM, "EPERM"}, {ENOENT, "ENOENT"}, {ESRCH, "ESRCH"}, {EINTR, "EINTR"}, {EIO, "EIO"},
  {E2BIG, "E2BIG"}, {ENOEXEC, "ENOEXEC"}, {EBADF, "EBADF"}, {ECHILD, "ECHILD"},
  {EAGAIN, "EAGAIN"}, {ENOMEM, "ENOMEM"}, {EACCES, "EACCES"}, {EFAULT, "EFAULT"},
  {EBUSY, "EBUSY"}, {EEXIST, "EEXIST"}, {EXDEV, "EXDEV"}, {ENODEV, "ENODEV"},
  {ENOTDIR, "ENOTDIR"}, {EISDIR, "EISDIR"}, {EINVAL, "EINVAL"}, {ENFILE, "ENFILE"},
  {EMFILE, "EMFILE"}, {ETXTBSY, "ETXTBSY"}, {EFBIG, "EFBIG"}, {ENOSPC, "ENOSPC"},
  {ESPIPE, "ESPIPE"}, {EROFS, "EROFS"}, {EMLINK, "EMLINK"}, {EPIPE, "EPIPE"},
  {ENAMETOOLONG, "ENAMETOOLONG"}, {ENOTEMPTY, "ENOTEMPTY"}, {ELOOP, "ELOOP"},
  {EOVERFLOW, "EOVERFLOW"}, {ECANCELED, "ECANCELED"}, {EDQUOT, "EDQUOT"},
  {ENOSYS, "ENOSYS"}, {EOPNOTSUPP, "EOPNOTSUPP"},
};

const char *errno_code(int err) {
  for (size_t i = 0; i < sizeof errnames / sizeof *errnames; i++)
    if (errnames[i].e == err) return errnames[i].n;
  return "EIO";
}

void send_error(uint32_t stream, int err, const char *msg) {
  struct jbuf j;
  jb_init(&j);
  jb_lit(&j, "{");
  jb_key(&j, "errno"); jb_int(&j, err);
  jb_key(&j, "code"); jb_lit(&j, "\""); jb_lit(&j, errno_code(err)); jb_lit(&j, "\"");
  const char *m = msg ? msg : strerror(err);
  jb_key(&j, "message"); jb_str(&j, m, strlen(m));
  jb_lit(&j, "}");
  send_json(T_ERROR, stream, &j);
}

static void on_frame(const struct frame *f) {
  if (f->stream == 0) {
    switch (f->type) {
      case T_HELLO: session_hello(f->payload, f->len); break;
      /* SYNC: the clock and RNG after a resume, without touching streams (no answer). */
      case T_SYNC: session_sync(f->payload, f->len); break;
      case T_PING: if (f->len <= 65536) send_frame(T_PONG, 0, f->payload, f->len); break;
      case T_SHUTDOWN:
        outq_flush(serial_fd);
        if (getpid() == 1) init_poweroff();
        exit(0);
    }
    return;
  }
  struct stream *s = stream_find(f->stream);
  if (s) {
    if (f->type == T_WINDOW) {
      if (f->len == 4) s->credit += rd32(f->payload);
    } else if (s->kind == S_EXEC) exec_frame(s, f->type, f->payload, f->len);
    else files_frame(s, f->type, f->payload, f->len);
    return;
  }
  switch (f->type) {
    case T_EXEC: case T_FILE_WRITE: case T_FILE_READ: case T_STAT: case T_LIST:
    case T_MKDIR: case T_REMOVE: case T_FSFREEZE: case T_FSTHAW: break;
    default: return; /* a frame for an unknown stream is dropped */
  }
  struct req r;
  int err = req_decode(f->payload, f->len, &r);
  if (err) { send_error(f->stream, err, "malformed request"); return; }
  if (f->type == T_EXEC) exec_start(f->stream, &r);
  else if (f->type == T_FSFREEZE || f->type == T_FSTHAW) fs_request(f->type, f->stream, &r);
  else files_request(f->type, f->stream, &r);
  req_free(&r);
}

static void on_disconnect(void) {
  connected = 0;
  frame_parser_reset(&parser);
  outq_drop(0);
}

/* Reads what the host sent. Bounded per call so children's output keeps flowing. One read of
 * the port returns at most one of the driver's page-sized buffers; readv takes many. */
static void serial_read(void) {
  static uint8_t in[65536];
  static struct iovec iov[sizeof in / 4096];
  for (size_t i = 0; i < sizeof iov / sizeof *iov; i++) iov[i] = (struct iovec){in + i * 4096, 4096};
  for (int round = 0; round < 16; round++) {
    ssize_t n = readv(serial_fd, iov, (int)(sizeof iov / sizeof *iov));
    if (n == 0) { on_disconnect(); return; }
    if (n < 0) {
      if (errno != EAGAIN && errno != EINTR) agent_log("serial read: %s", strerror(errno));
      return;
    }
    size_t off = 0;
    while (off < (size_t)n) {
      struct frame f;
      int got;
      off += frame_push(&parser, in + off, (size_t)n - off, &f, &got);
      if (got) on_frame(&f);
    }
  }
}

static int open_port(void) {
  for (int tries = 0;; tries++) {
    glob_t g;
    if (glob("/sys/class/virtio-ports/*/name", 0, NULL, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; i++) {
        char name[64] = {0}, dev[300];
        int fd = open(g.gl_pathv[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, name, sizeof name - 1);
        close(fd);
        if (n <= 0 || strncmp(name, "agent", 5) != 0 || (name[5] != 0 && name[5] != '\n'))
          continue;
        /* /sys/class/virtio-ports/vportNpM/name -> /dev/vportNpM */
        const char *port = g.gl_pathv[i] + strlen("/sys/class/virtio-ports/");
        snprintf(dev, sizeof dev, "/dev/%.*s", (int)(strchr(port, '/') - port), port);
        globfree(&g);
        for (int t = 0; t < 500; t++) {
          int pfd = open(dev, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
          if (pfd >= 0) return pfd;
          usleep(10000);
        }
        agent_log("cannot open %s: %s", dev, strerror(errno));
        return -1;
      }
      globfree(&g);
    }
    if (tries == 500) agent_log("no virtio port named agent yet; still waiting");
    usleep(10000);
  }
}

static int setup_signals(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

static void reap(int sfd) {
  struct signalfd_siginfo si;
  while (read(sfd, &si, sizeof si) > 0) {}
  int status;
  pid_t pid;
  /* As PID 1 we also adopt orphans: reap everything, not only our children. */
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) exec_reaped(pid, status);
}

struct slot { struct stream *s; int fd; };

static void at_most(int64_t *timeout, int64_t us) {
  if (*timeout < 0 || us < *timeout) *timeout = us;
}

int main(int argc, char **argv) {
  /* Run by EXEC as /proc/1/exe: a helper, not a second agent. */
  if (getpid() != 1 && argc > 1 && strcmp(argv[1], "mount") == 0) return mount_main(argc, argv);
  umask(0);
  if (getpid() == 1 && init_boot() < 0) agent_log("boot incomplete; serving anyway");
  int sfd = setup_signals();
  static uint8_t pbuf[FRAME_MAX];
  frame_parser_init(&parser, pbuf, FRAME_MAX);
  serial_fd = open_port();
  if (serial_fd < 0) for (;;) pause();
  struct timespec bt;
  clock_gettime(CLOCK_BOOTTIME, &bt);
  g_boot_ms = (uint64_t)bt.tv_sec * 1000 + (uint64_t)bt.tv_nsec / 1000000;
  session_ready();

  struct pollfd *pfd = NULL;
  struct slot *slots = NULL;
  size_t cap = 0;
  for (;;) {
    sweep();
    size_t nf = 0, need = 2;
    for (struct stream *s = g_streams; s; s = s->next) need += 3;
    if (need > cap) {
      cap = need * 2;
      pfd = realloc(pfd, cap * sizeof *pfd);
      slots = realloc(slots, cap * sizeof *slots);
      if (!pfd || !slots) { agent_log("out of memory"); abort(); }
    }
    if (!connected) {
      /* While no host is attached the port reads EOF and polls POLLHUP: probe it without
       * blocking and otherwise wake every 20 ms, never spin. */
      struct pollfd p = {serial_fd, POLLIN, 0};
      if (poll(&p, 1, 0) >= 0 && !(p.revents & POLLHUP)) connected = 1;
    }
    int64_t timeout = connected ? -1 : 20000; /* microseconds; -1: none */
    pfd[nf] = (struct pollfd){sfd, POLLIN, 0}; slots[nf++] = (struct slot){NULL, sfd};
    if (connected) {
      short ev = POLLIN | (outq_pending() ? POLLOUT : 0);
      pfd[nf] = (struct pollfd){serial_fd, ev, 0}; slots[nf++] = (struct slot){NULL, serial_fd};
    }
    uint64_t now_u = now_us(), now = now_u / 1000;
    int room = outq_room();
    for (struct stream *s = g_streams; s; s = s->next) {
      if (s->dead) continue;
      int may = s->detached || (room && s->credit > 0);
      if (s->kind == S_EXEC) {
        int fds[2] = {s->out_fd, s->err_fd};
        int held = !s->exited && s->hold_us > now_u;
        if (held && may) at_most(&timeout, (int64_t)(s->hold_us - now_u));
        for (int i = 0; i < 2; i++)
          if (fds[i] >= 0 && may && !held && (!s->exited || s->pty)) {
            pfd[nf] = (struct pollfd){fds[i], POLLIN, 0}; slots[nf++] = (struct slot){s, fds[i]};
          }
        if (s->in_fd >= 0 && (s->in_len || s->in_close)) {
          pfd[nf] = (struct pollfd){s->in_fd, POLLOUT, 0}; slots[nf++] = (struct slot){s, s->in_fd};
        }
        if (s->deadline_ms && !s->exited) {
          at_most(&timeout, s->deadline_ms > now ? (int64_t)(s->deadline_ms - now) * 1000 : 0);
        }
        if (s->exited && may) { /* drain what is left, then EXIT; a pty until EIO or drain_ms */
          at_most(&timeout, s->pty && s->out_fd >= 0 && s->drain_ms > now
                                ? (int64_t)(s->drain_ms - now) * 1000 : 0);
        }
      } else if ((s->kind == S_FREAD || s->kind == S_LIST) && may) {
        timeout = 0;
      }
    }
    struct timespec ts = {(time_t)(timeout / 1000000), (long)(timeout % 1000000) * 1000};
    int n = ppoll(pfd, nf, timeout < 0 ? NULL : &ts, NULL);
    if (n < 0 && errno != EINTR) { agent_log("poll: %s", strerror(errno)); usleep(10000); }
    for (size_t i = 0; n > 0 && i < nf; i++) {
      if (!pfd[i].revents) continue;
      if (pfd[i].fd == sfd && !slots[i].s) reap(sfd);
      else if (pfd[i].fd == serial_fd && !slots[i].s) {
        /* Read before honouring POLLHUP: a host may send SHUTDOWN and close at once. */
        if (pfd[i].revents & POLLIN) serial_read();
        if ((pfd[i].revents & POLLHUP) && connected) on_disconnect();
      } else if (!slots[i].s->dead) exec_pump(slots[i].s, pfd[i].fd, pfd[i].revents);
    }
    now = now_ms();
    for (struct stream *s = g_streams; s; s = s->next) {
      if (s->dead) continue;
      if (s->kind == S_EXEC) exec_tick(s, now);
      else if (s->kind == S_FREAD || s->kind == S_LIST) files_pump(s);
    }
    if (connected && outq_pending() && outq_flush(serial_fd) < 0) on_disconnect();
  }
}

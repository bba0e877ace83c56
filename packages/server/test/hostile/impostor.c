/* A hostile guest agent for packages/server/test/hostile: run as root inside a sandbox, it does
 * what root can always do there. It holds the real agent (PID 1) still with ptrace, takes the
 * agent's virtio-serial port with pidfd_getfd and speaks to the host itself:
 *   impostor spray       bad magic, oversized lengths, unknown types and streams, a HELLO storm
 *                        and 8 MiB of valid output frames to streams nobody reads; then it lets
 *                        the agent run on and writes /tmp/impostor.done
 *   impostor serve MODE  answers PINGs, STATs and FILE_READs (with "impostor"), and attacks the next EXEC:
 *                        credit (output without end, past its credit), deep (a deeply nested STARTED), tlv
 *                        (TLV bytes as EXIT), errmsg (an ERROR with a megabyte message, then the
 *                        agent runs on), stall (STARTED, then silence: no PONG either), loris
 *                        (half a frame, then silence)
 * Built static by the test with the host's gcc (the agent is built the same way). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum { HELLO = 1, HELLO_ACK = 2, READY = 3, PING = 4, PONG = 5, EXEC = 0x10, FILE_READ = 0x23,
       DATA = 0x21, END = 0x22, STAT = 0x24, RESULT = 0x30, ERROR = 0x31, STDOUT = 0x40, STARTED = 0x42, EXIT = 0x43 };
#define MAXP (1u << 20)
static int port = -1;

static void die(const char *m) { perror(m); exit(1); }

static void put(const void *b, size_t n) {
  const uint8_t *p = b;
  while (n) {
    ssize_t w = write(port, p, n);
    if (w < 0 && errno == EAGAIN) { /* the agent's descriptor is non-blocking: so is this copy */
      struct pollfd pf = {.fd = port, .events = POLLOUT};
      poll(&pf, 1, 1000);
      continue;
    }
    if (w < 0) die("write port");
    p += w; n -= (size_t)w;
  }
}

static void frame(uint8_t type, uint32_t stream, const void *payload, uint32_t len) {
  uint8_t h[12] = {0x54, 0x53, type, 0};
  memcpy(h + 4, &stream, 4);
  memcpy(h + 8, &len, 4);
  put(h, 12);
  if (len) put(payload, len);
}

/* The agent's port: the descriptor of PID 1 that points at /dev/vport*. */
static int agent_port_fd(void) {
  DIR *d = opendir("/proc/1/fd");
  if (!d) die("opendir");
  struct dirent *e;
  while ((e = readdir(d))) {
    char p[300], t[128];
    snprintf(p, sizeof p, "/proc/1/fd/%s", e->d_name);
    ssize_t n = readlink(p, t, sizeof t - 1);
    if (n > 0) { t[n] = 0; if (!strncmp(t, "/dev/vport", 10)) { int fd = atoi(e->d_name); closedir(d); return fd; } }
  }
  die("no port");
  return -1;
}

static void take_port(void) {
  int fd = agent_port_fd();
  if (ptrace(PTRACE_SEIZE, 1, 0, 0) < 0) die("seize");
  if (ptrace(PTRACE_INTERRUPT, 1, 0, 0) < 0) die("interrupt");
  int st;
  if (waitpid(1, &st, __WALL) < 0) die("waitpid");
  int pidfd = (int)syscall(SYS_pidfd_open, 1, 0);
  if (pidfd < 0) die("pidfd_open");
  port = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
  if (port < 0) die("pidfd_getfd");
}

static void release(void) { ptrace(PTRACE_DETACH, 1, 0, 0); }

static void spray(void) {
  static uint8_t junk[MAXP];
  memset(junk, 0xee, sizeof junk); /* no magic byte anywhere */
  put(junk, sizeof junk);
  for (int i = 0; i < 64; i++) { /* valid magic, lengths past the maximum */
    uint8_t h[12] = {0x54, 0x53, STDOUT, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, (uint8_t)(0x10 + i)};
    put(h, 12);
  }
  for (uint32_t i = 0; i < 4000; i++) {
    frame(0xee, i, junk, 8);                  /* unknown type */
    frame(EXIT, 0x40000000u + i, "{}", 2);    /* a stream never opened */
    frame(HELLO, 0, junk, 40);                /* HELLO storm, */
    frame(HELLO_ACK, 0, junk, 40);            /* stale acks, */
    frame(READY, 0, "{\"version\":1}", 13);   /* READYs */
    frame(PONG, 0, junk, 1024);               /* and answers to no ping */
  }
  for (int i = 0; i < 8; i++) frame(STDOUT, 0x50000000u + (uint32_t)i, junk, MAXP); /* 8 MiB nobody reads */
}

static uint8_t *read_frame(uint8_t *type, uint32_t *stream, uint32_t *len) {
  static uint8_t buf[MAXP + 12];
  size_t have = 0;
  for (;;) { /* header, resynchronising on the magic */
    ssize_t r = read(port, buf + have, 12 - have);
    if (r <= 0) { struct pollfd pf = {.fd = port, .events = POLLIN}; poll(&pf, 1, 1000); continue; }
    have += (size_t)r;
    while (have >= 2 && !(buf[0] == 0x54 && buf[1] == 0x53)) { memmove(buf, buf + 1, --have); }
    if (have == 12) break;
  }
  *type = buf[2];
  memcpy(stream, buf + 4, 4);
  memcpy(len, buf + 8, 4);
  if (*len > MAXP) *len = 0;
  for (size_t got = 0; got < *len;) {
    ssize_t r = read(port, buf + 12 + got, *len - got);
    if (r > 0) got += (size_t)r;
    else { struct pollfd pf = {.fd = port, .events = POLLIN}; poll(&pf, 1, 1000); }
  }
  return buf + 12;
}

static void serve(const char *mode) {
  static uint8_t big[MAXP];
  for (;;) {
    uint8_t type; uint32_t stream, len;
    uint8_t *p = read_frame(&type, &stream, &len);
    if (type == PING) { frame(PONG, 0, p, len); continue; }
    if (type == STAT) {
      const char *st = "{\"type\":\"file\",\"size\":8,\"mode\":420,\"uid\":0,\"gid\":0,\"mtime_ms\":0}";
      frame(RESULT, stream, st, (uint32_t)strlen(st));
      continue;
    }
    if (type == FILE_READ) { frame(DATA, stream, "impostor", 8); frame(END, stream, NULL, 0); continue; }
    if (type != EXEC) continue;
    if (strcmp(mode, "errmsg")) frame(STARTED, stream, "{\"pid\":4242}", 12);
    if (!strcmp(mode, "credit")) {
      memset(big, 'x', MAXP);
      for (;;) frame(STDOUT, stream, big, MAXP); /* no regard for WINDOW: until the host hangs up */
    } else if (!strcmp(mode, "deep")) {
      size_t n = 0;
      n += (size_t)sprintf((char *)big, "{\"pid\":");
      size_t depth = (MAXP - 16) / 2;
      memset(big + n, '[', depth); n += depth;
      memset(big + n, ']', depth); n += depth;
      big[n++] = '}';
      frame(STARTED, stream, big, (uint32_t)n);
    } else if (!strcmp(mode, "tlv")) {
      uint8_t t[] = {1, 0xff, 0xff, 0xff, 0xff, 'A', 2, 0xf0, 0xff, 0xff, 0x7f};
      frame(EXIT, stream, t, sizeof t);
    } else if (!strcmp(mode, "errmsg")) {
      size_t n = (size_t)sprintf((char *)big, "{\"errno\":5,\"code\":\"EIO\",\"message\":\"");
      memset(big + n, 'M', MAXP - n - 2); n = MAXP - 2;
      big[n++] = '"'; big[n++] = '}';
      frame(ERROR, stream, big, (uint32_t)n);
      release();
      return;
    } else if (!strcmp(mode, "loris")) {
      uint8_t h[6] = {0x54, 0x53, STDOUT, 0, 0, 0};
      memcpy(h + 4, &stream, 2);
      put(h, sizeof h); /* half a header: the host waits for the rest */
      for (;;) pause();
    }
    for (;;) pause(); /* stall, and after the others: the host should stop this VM */
  }
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: impostor spray | serve MODE\n"); return 2; }
  /* Let the agent finish the exec that started us (its EXIT out) before holding it: wait until
   * our parent, the shell of that exec, was reaped, then a little more. */
  pid_t parent = getppid();
  char pp[64];
  snprintf(pp, sizeof pp, "/proc/%d", (int)parent);
  setsid();
  for (int i = 0; i < 200 && parent != 1 && access(pp, F_OK) == 0; i++) usleep(50000);
  usleep(300000);
  take_port();
  if (!strcmp(argv[1], "spray")) {
    spray();
    release();
    int fd = open("/tmp/impostor.done", O_CREAT | O_WRONLY, 0644);
    if (fd >= 0) close(fd);
    return 0;
  }
  serve(argc > 2 ? argv[2] : "stall");
  return 0;
}

/* The outgoing frame queue. The serial port is nonblocking and may be disconnected for a
 * long time, so frames are queued here and written when poll() reports POLLOUT.
 * Bulk goes through a pipe and splice(): the port's write() takes at most 32 KiB (one buffer
 * and one notification of the host each), a splice hands the host every page the pipe holds
 * (up to 1 MiB) as one buffer, without copying them again. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "frame.h"
#include "outq.h"
#include "proto.h"

#define HIGH_WATER (1u << 20) /* producers pause above this many queued bytes */

static uint8_t *buf;
static size_t head, tail, cap;
static size_t fstart; /* start of the frame that contains head */

static int sp[2] = {-1, -1}; /* the splice pipe */
static size_t inpipe;        /* bytes in it the port has not taken yet */
static int no_splice;        /* the port refused splice once: plain writes only */

int outq_room(void) { return tail - head < HIGH_WATER; }
size_t outq_pending(void) { return tail - head + inpipe; }

static uint8_t *reserve(size_t n) {
  if (head == tail) head = tail = fstart = 0;
  if (tail + n > cap && fstart > 0) { /* compact; keeps the partly written frame whole */
    memmove(buf, buf + fstart, tail - fstart);
    tail -= fstart; head -= fstart; fstart = 0;
  }
  if (tail + n > cap) {
    size_t nc = cap ? cap : (4u << 20);
    while (nc < tail + n) nc *= 2;
    uint8_t *nb = realloc(buf, nc);
    if (!nb) return NULL;
    buf = nb; cap = nc;
  }
  return buf + tail;
}

void send_frame(uint8_t type, uint32_t stream, const void *p, size_t n) {
  uint8_t *d = reserve(FRAME_HDR + n);
  if (!d) { agent_log("out of memory: frame dropped"); return; }
  frame_header(d, type, stream, (uint32_t)n);
  if (n) memcpy(d + FRAME_HDR, p, n);
  tail += FRAME_HDR + n;
}

ssize_t send_read(uint8_t type, uint32_t stream, int fd, size_t max) {
  if (max > FRAME_MAX) max = FRAME_MAX;
  uint8_t *d = reserve(FRAME_HDR + max);
  if (!d) { errno = ENOMEM; return -1; }
  size_t got = 0;
  while (got < max) {
    ssize_t r = read(fd, d + FRAME_HDR + got, max - got);
    if (r > 0) { got += (size_t)r; continue; }
    if (r < 0 && errno == EINTR) continue;
    if (got == 0) return r;
    break; /* end of file or EAGAIN after data: the next call sees it again */
  }
  frame_header(d, type, stream, (uint32_t)got);
  tail += FRAME_HDR + got;
  return (ssize_t)got;
}

static size_t frame_end(size_t at) { return at + FRAME_HDR + rd32(buf + at + 8); }

static void advance(size_t n) {
  head += n;
  while (fstart < tail && head >= frame_end(fstart)) fstart = frame_end(fstart);
}

static void pipe_close(void) {
  if (sp[0] >= 0) { close(sp[0]); close(sp[1]); }
  sp[0] = sp[1] = -1;
  inpipe = 0;
}

/* splice() refused: send what the pipe holds with write() (waiting for the port), then stop
 * using it. Happens at most once, at the first bulk write. */
static int pipe_abandon(int fd) {
  static uint8_t tmp[65536];
  no_splice = 1;
  while (inpipe > 0) {
    ssize_t r = read(sp[0], tmp, inpipe < sizeof tmp ? inpipe : sizeof tmp);
    if (r <= 0) break;
    inpipe -= (size_t)r;
    for (size_t off = 0; off < (size_t)r;) {
      ssize_t w = write(fd, tmp + off, (size_t)r - off);
      if (w > 0) off += (size_t)w;
      else if (w < 0 && errno == EAGAIN) { struct pollfd p = {fd, POLLOUT, 0}; poll(&p, 1, 100); }
      else if (w < 0 && errno != EINTR) { pipe_close(); return -1; }
    }
  }
  pipe_close();
  return 0;
}

/* One step: splice the pipe into the port, else write the queue into the pipe. Returns the
 * bytes moved (0: both are full), -1 on a hard error. */
static ssize_t pipe_step(int fd) {
  if (inpipe > 0) {
    ssize_t n = splice(sp[0], NULL, fd, NULL, inpipe, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (n > 0) { inpipe -= (size_t)n; return n; }
    if (n < 0 && errno == EINTR) return 1;
    if (n < 0 && errno == EINVAL) return pipe_abandon(fd) < 0 ? -1 : 1;
    if (n < 0 && errno != EAGAIN) return -1;
  }
  if (head == tail) return 0;
  ssize_t w = write(sp[1], buf + head, tail - head);
  if (w > 0) { advance((size_t)w); inpipe += (size_t)w; return w; }
  if (w < 0 && errno == EINTR) return 1;
  return (w < 0 && errno != EAGAIN) ? -1 : 0;
}

int outq_flush(int fd) {
  /* Small amounts (answers, STARTED, EXIT) go straight to the port: one write, one buffer. */
  while (head < tail && (inpipe == 0 && (tail - head <= 32768 || no_splice))) {
    ssize_t w = write(fd, buf + head, tail - head);
    if (w < 0) {
      if (errno == EINTR) continue;
      return (errno == EAGAIN) ? 0 : -1;
    }
    advance((size_t)w);
  }
  if (head == tail && inpipe == 0) return 0;
  if (sp[0] < 0) {
    if (pipe2(sp, O_NONBLOCK | O_CLOEXEC) < 0) { no_splice = 1; return outq_flush(fd); }
    fcntl(sp[1], F_SETPIPE_SZ, 1 << 20); /* best effort: a smaller pipe only splices less at once */
  }
  for (;;) {
    ssize_t n = pipe_step(fd);
    if (n < 0) return -1;
    if (n == 0) return 0;
    if (no_splice) return outq_flush(fd);
  }
}

void outq_drop(int keep_partial) {
  /* What the pipe holds is a prefix of the byte stream: kept on HELLO (the host drops what
   * precedes its HELLO_ACK), discarded with the connection. */
  if (!keep_partial) pipe_close();
  if (keep_partial && head > fstart) tail = frame_end(fstart);
  else tail = head;
  if (head == tail) head = tail = fstart = 0;
}

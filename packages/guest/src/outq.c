/* The outgoing frame queue. The serial port is nonblocking and may be disconnected for a
 * long time, so frames are queued here and written when poll() reports POLLOUT. */
#include <errno.h>
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

int outq_room(void) { return tail - head < HIGH_WATER; }
size_t outq_pending(void) { return tail - head; }

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

int outq_flush(int fd) {
  while (head < tail) {
    ssize_t w = write(fd, buf + head, tail - head);
    if (w < 0) {
      if (errno == EINTR) continue;
      return (errno == EAGAIN) ? 0 : -1;
    }
    head += (size_t)w;
    while (fstart < tail && head >= frame_end(fstart)) fstart = frame_end(fstart);
  }
  return 0;
}

void outq_drop(int keep_partial) {
  if (keep_partial && head > fstart) tail = frame_end(fstart);
  else tail = head;
  if (head == tail) head = tail = fstart = 0;
}

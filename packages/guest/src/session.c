/* The host session's control frames: READY at start, HELLO (a host attached, or the guest was
 * restored from a snapshot: resync, forget every stream) and SYNC (clock, entropy, root disk and
 * network after a resume, streams untouched). */
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "outq.h"
#include "proto.h"

static void send_hello_json(uint8_t type, const uint8_t *nonce) {
  struct jbuf j;
  jb_init(&j);
  if (nonce) jb_raw(&j, (const char *)nonce, HELLO_NONCE);
  jb_lit(&j, "{");
  jb_key(&j, "version"); jb_int(&j, PROTO_VERSION);
  jb_key(&j, "kernel"); jb_str(&j, g_kernel_release, strlen(g_kernel_release));
  jb_key(&j, "boot_ms"); jb_int(&j, (int64_t)g_boot_ms);
  jb_key(&j, "root"); jb_str(&j, g_root_state, strlen(g_root_state));
  jb_lit(&j, "}");
  send_json(type, 0, &j);
}

/* ROOT mounts a waiting root disk first (so NET writes the sandbox's resolv.conf); TIME_NS
 * sets the clock; ENTROPY is mixed in and the CRNG reseeded. */
void session_sync(const uint8_t *p, size_t n) {
  struct req r;
  if (req_decode(p, n, &r) == 0) {
    if (r.has_root && getpid() == 1) init_mount_root(r.root_bytes);
    if (r.has_time) {
      struct timespec t = {(time_t)(r.time_ns / 1000000000u), (long)(r.time_ns % 1000000000u)};
      if (clock_settime(CLOCK_REALTIME, &t)) agent_log("clock_settime: %s", strerror(errno));
    }
    if (r.entropy_len > 0 && r.entropy_len <= 4096) {
      struct { struct rand_pool_info i; uint8_t b[4096]; } e;
      e.i.entropy_count = (int)r.entropy_len * 8;
      e.i.buf_size = (int)r.entropy_len;
      memcpy(e.i.buf, r.entropy, r.entropy_len);
      int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ioctl(fd, RNDADDENTROPY, &e) < 0)
        agent_log("RNDADDENTROPY: %s", strerror(errno));
      /* Added entropy only reaches /dev/urandom at the next CRNG reseed: force it now, so
       * clones of one snapshot never hand out the same bytes. */
      else if (ioctl(fd, RNDRESEEDCRNG, 0) < 0)
        agent_log("RNDRESEEDCRNG: %s", strerror(errno));
      if (fd >= 0) close(fd);
    }
    if (r.net) net_apply(r.net);
    req_free(&r);
  }
}

/* Every HELLO after the first means this guest was restored from a snapshot (or its host
 * reconnected): /run/sandtree/generation counts them so programs inside can notice (inotify or
 * poll) and reseed their own generators. Written atomically (temp file + rename). */
static void announce_generation(void) {
  static unsigned hellos;
  if (++hellos < 2) return;
  mkdir("/run/sandtree", 0755);
  int fd = open("/run/sandtree/.generation", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char buf[32];
  int len = snprintf(buf, sizeof buf, "%u\n", hellos - 1);
  if (write(fd, buf, (size_t)len) < 0) {}
  close(fd);
  rename("/run/sandtree/.generation", "/run/sandtree/generation");
}

/* HELLO: set the clock, mix in entropy, forget every stream, then acknowledge. */
void session_hello(const uint8_t *p, size_t n) {
  if (n < HELLO_NONCE) return;
  session_sync(p + HELLO_NONCE, n - HELLO_NONCE);
  announce_generation();
  for (struct stream *s = g_streams; s; s = s->next) {
    if (s->dead || s->detached) continue;
    if (s->kind == S_EXEC) exec_detach(s);
    else stream_end(s);
  }
  outq_drop(1);
  send_hello_json(T_HELLO_ACK, p);
}

void session_ready(void) { send_hello_json(T_READY, NULL); }

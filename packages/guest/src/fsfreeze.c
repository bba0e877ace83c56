/* FSFREEZE / FSTHAW: quiesce a filesystem so the host can snapshot its disk consistently.
 * The host sends FSFREEZE, takes the block-level snapshot, then FSTHAW. If the host vanishes
 * in between, an alarm thaws after a deadline so the guest never stays frozen. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "agent.h"
#include "json.h"
#include "proto.h"
#include "req.h"

#define FREEZE_DEADLINE_S 10

static volatile int frozen_fd = -1;

static void thaw_now(void) {
  int fd = frozen_fd;
  if (fd < 0) return;
  ioctl(fd, FITHAW, 0);
  close(fd);
  frozen_fd = -1;
}

static void on_alarm(int sig) {
  (void)sig;
  thaw_now(); /* ioctl and close are async-signal-safe */
}

static void reply_ok(uint32_t id) {
  struct jbuf j;
  jb_init(&j);
  jb_lit(&j, "{}");
  send_json(T_RESULT, id, &j);
}

void fs_request(uint8_t type, uint32_t id, struct req *r) {
  const char *path = r->path ? r->path : "/";
  if (type == T_FSTHAW) {
    alarm(0);
    if (frozen_fd < 0) { send_error(id, EINVAL, "filesystem is not frozen"); return; }
    thaw_now();
    reply_ok(id);
    return;
  }
  if (frozen_fd >= 0) { send_error(id, EBUSY, "a filesystem is already frozen"); return; }
  sync();
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) { send_error(id, errno, "cannot open the mount point"); return; }
  if (ioctl(fd, FIFREEZE, 0) < 0) {
    int e = errno;
    close(fd);
    send_error(id, e, "FIFREEZE failed");
    return;
  }
  frozen_fd = fd;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  alarm(FREEZE_DEADLINE_S);
  reply_ok(id);
}

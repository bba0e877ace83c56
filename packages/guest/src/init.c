/* PID-1 boot: kernel filesystems, virtio modules (modules.c), the root disk (grown online to the
 * device size), then a switch into it. The agent keeps running from the initramfs copy in
 * memory; nothing from the image is executed for init.
 * With sandtree.root=wait (a warm template) the boot stops before the root disk is read: the
 * agent serves, the host saves the VM, and each clone's first HELLO carries TAG_ROOT with its
 * own disk's size; init_mount_root() then mounts that disk and switches into it. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "boot.h"

#ifndef EXT4_IOC_RESIZE_FS
#define EXT4_IOC_RESIZE_FS _IOW('f', 16, unsigned long long) /* not in the uapi headers */
#endif

char g_kernel_release[65];
uint64_t g_boot_ms;
const char *g_root_state = "mounted";
static char g_root_dev[64];

void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void do_mount(const char *src, const char *dst, const char *type, unsigned long fl,
                     const char *data) {
  mkdir(dst, 0755);
  if (mount(src, dst, type, fl, data) < 0)
    agent_log("mount %s on %s: %s", src, dst, strerror(errno));
}

/* The value of key=VALUE on the kernel command line, or def. */
void cmdline_get(const char *key, char *out, size_t n, const char *def) {
  char buf[4096] = {0};
  snprintf(out, n, "%s", def);
  int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t r = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (r <= 0) return;
  size_t kl = strlen(key);
  for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
    if (strncmp(t, key, kl) == 0 && t[kl] == '=') snprintf(out, n, "%s", t + kl + 1);
}


static int wait_for(const char *path, int ms) {
  for (int t = 0; t < ms; t += 5) {
    if (access(path, F_OK) == 0) return 0;
    sleep_ms(5);
  }
  return -1;
}

/* Grows the mounted ext4 to the size of its block device (the host may hand out an
 * overlay with a larger virtual size than the image). */
static void grow_fs(const char *dev, const char *mnt) {
  unsigned long long bytes = 0, blocks;
  struct statfs sf;
  int fd = open(dev, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ioctl(fd, BLKGETSIZE64, &bytes) < 0) {
    agent_log("BLKGETSIZE64 %s: %s", dev, strerror(errno));
    if (fd >= 0) close(fd);
    return;
  }
  close(fd);
  if (statfs(mnt, &sf) < 0 || sf.f_bsize <= 0) return;
  blocks = bytes / (unsigned long long)sf.f_bsize;
  fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  if (ioctl(fd, EXT4_IOC_RESIZE_FS, &blocks) < 0)
    agent_log("resize %s to %llu blocks: %s", mnt, blocks, strerror(errno));
  close(fd);
}

/* mkdir -p (following the image's relative symlinks such as Debian's lib -> usr/lib). */
void mkdirs(const char *path) {
  char p[256];
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') { *s = 0; mkdir(p, 0755); *s = '/'; }
  mkdir(p, 0755);
}

void write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, text, strlen(text)) < 0) agent_log("write %s: %s", path, strerror(errno));
  if (fd >= 0) close(fd);
}


/* cgroup v2 with every available controller enabled for the root's children. */
static void mount_cgroup(const char *root) {
  char p[96], ctl[512] = {0}, want[600] = {0};
  snprintf(p, sizeof p, "%s/sys/fs/cgroup", root);
  if (mount("cgroup2", p, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, "nsdelegate") < 0) {
    agent_log("mount cgroup2: %s", strerror(errno));
    return;
  }
  snprintf(p, sizeof p, "%s/sys/fs/cgroup/cgroup.controllers", root);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t r = read(fd, ctl, sizeof ctl - 1);
  close(fd);
  if (r <= 0) return;
  for (char *t = strtok(ctl, " \n"); t; t = strtok(NULL, " \n")) {
    size_t l = strlen(want);
    snprintf(want + l, sizeof want - l, "%s+%s", l ? " " : "", t);
  }
  snprintf(p, sizeof p, "%s/sys/fs/cgroup/cgroup.subtree_control", root);
  write_file(p, want);
}

/* What lives under /dev and /sys: mounted before the switch (these trees are moved into the
 * root whole), so a template has them already. */
static void dev_sys_mounts(const char *root) {
  char p[64];
  snprintf(p, sizeof p, "%s/dev/pts", root);
  do_mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC, "ptmxmode=666,mode=620,gid=5");
  snprintf(p, sizeof p, "%s/dev/shm", root);
  do_mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  snprintf(p, sizeof p, "%s/dev/mqueue", root);
  do_mount("mqueue", p, "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  snprintf(p, sizeof p, "%s/dev/ptmx", root);
  if (access(p, F_OK) != 0 && symlink("pts/ptmx", p) < 0) agent_log("ptmx: %s", strerror(errno));
  mount_cgroup(root);
}

/* A template (sandtree.root=wait) mounts what does not depend on the root disk before it is
 * saved: /dev and /sys submounts, and the modules disk at /modules (moved in at the switch). */
static int g_premounted;

static void late_mounts(const char *root) {
  char p[160];
  if (!g_premounted) dev_sys_mounts(root);
  snprintf(p, sizeof p, "%s/run", root);
  do_mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755");
  if (!g_premounted) {
    mount_modules(root);
  } else if (modules_disk_on()) {
    snprintf(p, sizeof p, "%s/lib/modules/%s", root, g_kernel_release);
    mkdirs(p);
    if (mount("/modules", p, NULL, MS_MOVE, NULL) < 0) agent_log("move modules: %s", strerror(errno));
  }
  static_nodes(root);
}

static int switch_root(const char *dev) {
  if (wait_for(dev, 10000) < 0) { agent_log("%s did not appear", dev); return -1; }
  mkdir("/newroot", 0755);
  /* noinit_itable: no ext4lazyinit thread zeroing the inode tables of the groups grow_fs adds
   * (uninitialised groups are marked so; zeroing them only helps fsck): in an idle sandbox it
   * wrote to the disk several times a second for minutes, each write a COW into the overlay. */
  if (mount(dev, "/newroot", "ext4", 0, "noinit_itable") < 0) {
    agent_log("mount %s: %s", dev, strerror(errno));
    return -1;
  }
  grow_fs(dev, "/newroot");
  const char *moves[] = {"/dev", "/proc", "/sys"};
  for (int i = 0; i < 3; i++) {
    char dst[64];
    snprintf(dst, sizeof dst, "/newroot%s", moves[i]);
    mkdir(dst, 0755);
    if (mount(moves[i], dst, NULL, MS_MOVE, NULL) < 0)
      agent_log("move %s: %s", moves[i], strerror(errno));
  }
  late_mounts("/newroot");
  if (chdir("/newroot") < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
      chdir("/") < 0) {
    agent_log("switch root: %s", strerror(errno));
    return -1;
  }
  return 0;
}

static void loopback_up(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0) { agent_log("lo: %s", strerror(errno)); }
  else {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) agent_log("lo up: %s", strerror(errno));
  }
  if (s >= 0) close(s);
}

int init_boot(void) {
  struct utsname u;
  if (uname(&u) == 0) snprintf(g_kernel_release, sizeof g_kernel_release, "%s", u.release);
  do_mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
  /* Kernel messages and our log go to the console; children never inherit it. */
  int c = open("/dev/console", O_RDWR | O_NOCTTY);
  if (c >= 0) { dup2(c, 0); dup2(c, 1); dup2(c, 2); if (c > 2) close(c); }
  do_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  do_mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  modules_boot();
  char root[64];
  cmdline_get("sandtree.root", root, sizeof root, "/dev/vda");
  int rc = 0;
  if (strcmp(root, "none") == 0) late_mounts("");
  else if (strcmp(root, "wait") == 0) {
    snprintf(g_root_dev, sizeof g_root_dev, "/dev/vda");
    g_root_state = "waiting";
    dev_sys_mounts("");
    mount_modules_at("/modules", "/proc");
    g_premounted = 1;
  } else rc = switch_root(root);
  loopback_up();
  net_boot();
  if (sethostname("sandbox", 7) < 0) agent_log("sethostname: %s", strerror(errno));
  return rc;
}

/* A clone of a template booted with sandtree.root=wait: mount the root disk the host attached
 * (its size is `bytes`) and switch into it. The template's kernel probed the placeholder disk
 * the template was booted with (partition scan): its size and the pages it read are cached, so
 * wait until virtio-blk reports the clone's size (the host resized the drive, which raises a
 * config interrupt) and drop the block device's cache before ext4 reads a byte. */
void init_mount_root(uint64_t bytes) {
  if (strcmp(g_root_state, "waiting") != 0) return;
  g_root_state = "failed";
  int fd = open(g_root_dev, O_RDONLY | O_CLOEXEC);
  if (fd < 0) { agent_log("open %s: %s", g_root_dev, strerror(errno)); return; }
  unsigned long long now = 0;
  uint64_t t0 = now_ms();
  for (int t = 0; t < 5000; t++) {
    if (ioctl(fd, BLKGETSIZE64, &now) == 0 && now == bytes) break;
    sleep_ms(1);
  }
  if (now != bytes) agent_log("%s: %llu bytes, expected %llu", g_root_dev, now, (unsigned long long)bytes);
  if (ioctl(fd, BLKFLSBUF, 0) < 0) agent_log("BLKFLSBUF %s: %s", g_root_dev, strerror(errno));
  close(fd);
  uint64_t t1 = now_ms();
  if (switch_root(g_root_dev) == 0) g_root_state = "mounted";
  agent_log("root %s: size wait %llu ms, mount and switch %llu ms (%s)", g_root_dev,
            (unsigned long long)(t1 - t0), (unsigned long long)(now_ms() - t1), g_root_state);
}

/* Reaps until no child is left or ms elapsed. */
static void reap_all(int ms) {
  for (int t = 0; t <= ms; t += 10) {
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
    if (waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD) return;
    sleep_ms(10);
  }
}

void init_poweroff(void) {
  sync();
  kill(-1, SIGTERM);
  reap_all(2000);
  kill(-1, SIGKILL);
  reap_all(1000);
  sync();
  const char *um[] = {"/dev/shm", "/dev/pts", "/dev/mqueue", "/run", "/sys/fs/cgroup"};
  for (int i = 0; i < 5; i++) umount2(um[i], MNT_DETACH);
  if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL) < 0)
    agent_log("remount / ro: %s", strerror(errno));
  sync();
  reboot(RB_POWER_OFF);
  /* Without a power-off method the kernel halts; QEMU runs with -no-reboot, so a reboot
   * request makes it exit instead. */
  reboot(RB_AUTOBOOT);
  for (;;) pause();
}

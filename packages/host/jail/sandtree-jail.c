/*
 * sandtree-jail: the jail's launcher for one QEMU (docs/security.md), one process exec'd into
 * the program it starts, so the spawned pid is the program's own. Its whole plan is its argv,
 * written by the server (packages/host/src/vmm/jail-root.ts); nothing else is read:
 *
 *   sandtree-jail --root DIR --uid N [--tap NAME] [--no-thp] [STEP...] -- PROGRAM ARG...
 *
 * In order: --tap makes the host's tap NAME usable by uid N and gid N (TUNSETIFF, TUNSETOWNER,
 * TUNSETGROUP) while still in the host's namespaces; a private mount namespace (/ made private,
 * recursively); a tmpfs at DIR (mode 0755, 1 MiB, nosuid); the STEPs, each a path inside the new
 * root (the same path on the host for links, devices and binds):
 *   --mkdir P      directory P and its parents (0755)
 *   --link P       the host's symbolic link P, copied
 *   --dev P        the host's device node P, copied (type, major/minor, mode, owner)
 *   --bind P       P bound read-write;      --bind-ro P      bound, then remounted read-only
 *   --bind-file P  a file P bound (an empty file made to mount on); --bind-file-ro P read-only
 *   --tun          its own /dev/net/tun (c 10 200, 0666)
 * then its own /proc (hidepid=invisible,subset=pid), pivot_root into DIR, the host's tree
 * detached; then no supplementary groups, gid and uid N, every capability dropped (bounding,
 * ambient, inheritable, permitted, effective), no_new_privs, with --no-thp transparent huge pages
 * off for it (PR_SET_THP_DISABLE, kept across exec: TCG's translation cache, madvised huge, is
 * then resident by the 4 KiB page it uses, not by the 2 MiB one), and PROGRAM exec'd (PATH searched).
 * Descriptors are inherited as they are. Any failed step: a message with errno on stderr, exit 125.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static void die(const char *step, const char *what) {
  fprintf(stderr, "sandtree-jail: %s %s: %s\n", step, what ? what : "", strerror(errno));
  exit(125);
}

static void usage(const char *why) {
  fprintf(stderr, "sandtree-jail: %s\nusage: sandtree-jail --root DIR --uid N [--tap NAME] [STEP...] -- PROGRAM ARG...\n", why);
  exit(125);
}

static const char *root;
static char buf[PATH_MAX];

/* `p` (absolute) inside the new root. */
static const char *in_root(const char *p) {
  if (p[0] != '/') usage("paths must be absolute");
  if (snprintf(buf, sizeof buf, "%s%s", root, p) >= (int)sizeof buf) usage("path too long");
  return buf;
}

static void mkdir_p(const char *p) {
  char d[PATH_MAX];
  snprintf(d, sizeof d, "%s", p);
  for (char *s = d + 1;; s++) {
    if (*s == '/' || *s == '\0') {
      char c = *s;
      *s = '\0';
      if (mkdir(d, 0755) != 0 && errno != EEXIST) die("mkdir", d);
      if (c == '\0') break;
      *s = c;
    }
  }
}

static void own_tap(const char *name, uid_t uid) {
  struct ifreq ifr;
  if (strlen(name) >= IFNAMSIZ) usage("tap name too long");
  int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) die("open", "/dev/net/tun");
  memset(&ifr, 0, sizeof ifr);
  strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) die("TUNSETIFF", name);
  if (ioctl(fd, TUNSETOWNER, (unsigned long)uid) != 0) die("TUNSETOWNER", name);
  if (ioctl(fd, TUNSETGROUP, (unsigned long)uid) != 0) die("TUNSETGROUP", name);
  close(fd);
}

static void copy_link(const char *p) {
  char target[PATH_MAX];
  ssize_t n = readlink(p, target, sizeof target - 1);
  if (n < 0) die("readlink", p);
  target[n] = '\0';
  if (symlink(target, in_root(p)) != 0) die("symlink", buf);
}

static void copy_dev(const char *p) {
  struct stat st;
  if (stat(p, &st) != 0) die("stat", p);
  if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) { errno = ENODEV; die("not a device:", p); }
  in_root(p);
  if (mknod(buf, st.st_mode, st.st_rdev) != 0) die("mknod", buf);
  if (chown(buf, st.st_uid, st.st_gid) != 0) die("chown", buf);
  if (chmod(buf, st.st_mode & 07777) != 0) die("chmod", buf);
}

static void bind_path(const char *p, int file, int ro) {
  in_root(p);
  if (file) {
    int fd = open(buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) die("create", buf);
    close(fd);
  }
  if (mount(p, buf, NULL, MS_BIND, NULL) != 0) die("bind", p);
  if (ro && mount(NULL, buf, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) != 0) die("remount read-only", buf);
}

static void drop_privileges(uid_t uid) {
  /* The bounding set needs CAP_SETPCAP: emptied while still root. */
  for (int cap = 0; cap <= 63; cap++)
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      if (errno == EINVAL) break;
      die("PR_CAPBSET_DROP", NULL);
    }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) die("PR_CAP_AMBIENT_CLEAR_ALL", NULL);
  if (setgroups(0, NULL) != 0) die("setgroups", NULL);
  if (setresgid(uid, uid, uid) != 0) die("setresgid", NULL);
  if (setresuid(uid, uid, uid) != 0) die("setresuid", NULL);
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  memset(d, 0, sizeof d);
  if (syscall(SYS_capset, &h, d) != 0) die("capset", NULL);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("PR_SET_NO_NEW_PRIVS", NULL);
}

int main(int argc, char **argv) {
  const char *tap = NULL;
  long uid = -1;
  int no_thp = 0;
  int prog = 0;
  /* First pass: the options every step depends on, and where PROGRAM starts. */
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) { prog = i + 1; break; }
    if (strcmp(argv[i], "--tun") == 0 || strcmp(argv[i], "--no-thp") == 0) continue;
    if (i + 1 >= argc) usage("missing value");
    if (strcmp(argv[i], "--root") == 0) root = argv[i + 1];
    else if (strcmp(argv[i], "--uid") == 0) {
      char *end;
      errno = 0;
      uid = strtol(argv[i + 1], &end, 10);
      if (errno || *end || uid <= 0 || uid > 0x7fffffff) usage("bad --uid");
    } else if (strcmp(argv[i], "--tap") == 0) tap = argv[i + 1];
    i++;
  }
  if (!root || root[0] != '/' || uid < 0 || !prog || prog >= argc) usage("--root, --uid and a program are required");

  if (tap) own_tap(tap, (uid_t)uid);
  if (unshare(CLONE_NEWNS) != 0) die("unshare", "CLONE_NEWNS");
  if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("make private", "/");
  if (mount("tmpfs", root, "tmpfs", MS_NOSUID, "mode=0755,size=1m") != 0) die("mount tmpfs", root);

  for (int i = 1; i < prog - 1; i++) {
    const char *o = argv[i];
    if (strcmp(o, "--no-thp") == 0) {
      no_thp = 1;
      continue;
    }
    if (strcmp(o, "--tun") == 0) {
      in_root("/dev/net/tun");
      if (mknod(buf, S_IFCHR | 0666, makedev(10, 200)) != 0) die("mknod", buf);
      if (chmod(buf, 0666) != 0) die("chmod", buf);
      continue;
    }
    const char *p = argv[++i];
    if (!strcmp(o, "--root") || !strcmp(o, "--uid") || !strcmp(o, "--tap")) continue;
    if (!strcmp(o, "--mkdir")) mkdir_p(in_root(p));
    else if (!strcmp(o, "--link")) copy_link(p);
    else if (!strcmp(o, "--dev")) copy_dev(p);
    else if (!strcmp(o, "--bind")) bind_path(p, 0, 0);
    else if (!strcmp(o, "--bind-ro")) bind_path(p, 0, 1);
    else if (!strcmp(o, "--bind-file")) bind_path(p, 1, 0);
    else if (!strcmp(o, "--bind-file-ro")) bind_path(p, 1, 1);
    else { fprintf(stderr, "sandtree-jail: unknown step %s\n", o); exit(125); }
  }

  if (mount("proc", in_root("/proc"), "proc", 0, "hidepid=invisible,subset=pid") != 0) die("mount proc", buf);
  if (chdir(root) != 0) die("chdir", root);
  if (syscall(SYS_pivot_root, ".", ".old") != 0) die("pivot_root", root);
  if (umount2("/.old", MNT_DETACH) != 0) die("umount", "/.old");
  if (chdir("/") != 0) die("chdir", "/");

  if (no_thp && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) die("PR_SET_THP_DISABLE", NULL);
  drop_privileges((uid_t)uid);
  execvp(argv[prog], argv + prog);
  die("exec", argv[prog]);
  return 125;
}

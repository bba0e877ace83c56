/* The guest kernel's modules at boot: the initramfs's virtio modules, the read-only modules disk
 * (the kernel's whole module tree, build-guest.sh makes it) mounted at /lib/modules/<release>,
 * KVM when a sandbox asked for nested virtualization, and the static device nodes of modules not
 * loaded yet. Called by init.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent.h"
#include "boot.h"

/* Loads /lib/modules/<name> for each line of /etc/modules.order (already dependency
 * ordered by build-guest.sh), then deletes the files: the initramfs is RAM. */
static void load_modules(void) {
  FILE *f = fopen("/etc/modules.order", "re");
  if (!f) return;
  char line[256], path[300];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0] || line[0] == '#') continue;
    snprintf(path, sizeof path, "/lib/modules/%s", line);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { agent_log("module %s: %s", line, strerror(errno)); continue; }
    if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
      agent_log("finit_module %s: %s", line, strerror(errno));
    close(fd);
    unlink(path);
  }
  fclose(f);
}

/* The virtio disk whose serial is `serial` (root/sys/block/vdX/serial), as root/dev/vdX, waiting
 * up to ms for it to appear. */
static int find_disk(const char *root, const char *serial, char *dev, size_t n, int ms) {
  for (int t = 0; t < ms; t += 5) {
    for (char c = 'a'; c <= 'z'; c++) {
      char p[96], buf[64] = {0};
      snprintf(p, sizeof p, "%s/sys/block/vd%c/serial", root, c);
      int fd = open(p, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      ssize_t r = read(fd, buf, sizeof buf - 1);
      close(fd);
      if (r > 0 && strncmp(buf, serial, strlen(serial)) == 0) {
        snprintf(dev, n, "%s/dev/vd%c", root, c);
        return 0;
      }
    }
    sleep_ms(5);
  }
  return -1;
}

/* sandtree.modules=on: the modules disk is attached. sandtree.kvm=on (a sandbox asked for nested
 * virtualization): the guest's CPU offers SVM or VMX, load KVM for it, so /dev/kvm exists without
 * a modprobe (there is no udev to do it). */
static char g_modules_on[16], g_kvm_on[8];
static void load_kvm(const char *moddir);
/* Where /sys is when the modules disk is looked for: "" before the switch, the new root after. */
static const char *g_sysroot = "";

/* Mounts the modules disk at dst (root/lib/modules/<release>, or /modules in a template, moved
 * into the root once it is mounted) and points the kernel's module loader at its modprobe. */
void mount_modules_at(const char *dst, const char *procdir) {
  char dev[64], p[160];
  if (strcmp(g_modules_on, "on") != 0) return;
  if (find_disk(g_sysroot, "sandtree-modules", dev, sizeof dev, 5000) < 0) {
    agent_log("modules disk did not appear");
    return;
  }
  mkdirs(dst);
  if (mount(dev, dst, "ext4", MS_RDONLY | MS_NODEV | MS_NOSUID, NULL) < 0) {
    agent_log("mount modules %s: %s", dev, strerror(errno));
    return;
  }
  char loader[128];
  snprintf(loader, sizeof loader, "/lib/modules/%s/bin/modprobe", g_kernel_release);
  snprintf(p, sizeof p, "%s/sys/kernel/modprobe", procdir);
  write_file(p, loader);
  load_kvm(dst);
}

static void insmod(const char *dir, const char *rel) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) { agent_log("module %s: %s", rel, strerror(errno)); return; }
  if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST) agent_log("finit_module %s: %s", rel, strerror(errno));
  close(fd);
}

static void load_kvm(const char *moddir) {
  char buf[4096] = {0};
  if (strcmp(g_kvm_on, "on") != 0) return;
  int fd = open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t r = read(fd, buf, sizeof buf - 1);
    (void)r;
    close(fd);
  }
  insmod(moddir, "kernel/virt/lib/irqbypass.ko");
  insmod(moddir, "kernel/arch/x86/kvm/kvm.ko");
  insmod(moddir, strstr(buf, "GenuineIntel") ? "kernel/arch/x86/kvm/kvm-intel.ko" : "kernel/arch/x86/kvm/kvm-amd.ko");
}

void mount_modules(const char *root) {
  char dst[160], procdir[96];
  g_sysroot = root;
  snprintf(dst, sizeof dst, "%s/lib/modules/%s", root, g_kernel_release);
  snprintf(procdir, sizeof procdir, "%s/proc", root);
  mount_modules_at(dst, procdir);
}

/* Device nodes of modules not loaded yet (modules.devname: "fuse fuse c10:229"), as kmod's
 * `static-nodes` makes them at boot on a normal host: opening one loads its module (so
 * /dev/fuse works before anyone runs modprobe). Modes as Debian's udev rules set them. */
void static_nodes(const char *root) {
  char p[200], line[160], mod[64], name[64];
  unsigned maj, min;
  snprintf(p, sizeof p, "%s/lib/modules/%s/modules.devname", root, g_kernel_release);
  FILE *f = fopen(p, "re");
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || sscanf(line, "%63s %63s c%u:%u", mod, name, &maj, &min) != 4) continue;
    if (strstr(name, "..")) continue;
    snprintf(p, sizeof p, "%s/dev/%s", root, name);
    char *slash = strrchr(p, '/');
    *slash = 0;
    mkdirs(p);
    *slash = '/';
    int open_to_all = !strcmp(name, "fuse") || !strcmp(name, "net/tun");
    mode_t mode = open_to_all ? 0666 : 0600;
    if (mknod(p, S_IFCHR | mode, makedev(maj, min)) < 0 && errno != EEXIST)
      agent_log("mknod %s: %s", p, strerror(errno));
    else
      chmod(p, mode); /* mknod applies the umask */
  }
  fclose(f);
}

void modules_boot(void) {
  load_modules();
  cmdline_get("sandtree.modules", g_modules_on, sizeof g_modules_on, "off");
  cmdline_get("sandtree.kvm", g_kvm_on, sizeof g_kvm_on, "off");
}

int modules_disk_on(void) { return strcmp(g_modules_on, "on") == 0; }

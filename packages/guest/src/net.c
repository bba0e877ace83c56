/* eth0 from the host's TAG_NET, sent with every HELLO (boot, restore, reconnect) so a clone of
 * a template or of a memory checkpoint takes its own address instead of its source's. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

#define IFACE "eth0"

static void set_sin(struct sockaddr *sa, in_addr_t a) {
  struct sockaddr_in *sin = (struct sockaddr_in *)sa;
  memset(sin, 0, sizeof *sin);
  sin->sin_family = AF_INET;
  sin->sin_addr.s_addr = a;
}

static int if_flags(int s, short set, short clear) {
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, IFACE);
  if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) return -1;
  ifr.ifr_flags = (short)((ifr.ifr_flags | set) & ~clear);
  return ioctl(s, SIOCSIFFLAGS, &ifr);
}

static in_addr_t current_addr(int s) {
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, IFACE);
  if (ioctl(s, SIOCGIFADDR, &ifr) < 0) return 0;
  return ((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr.s_addr;
}

static int route_default(int s, unsigned long op, in_addr_t gw) {
  struct rtentry rt;
  memset(&rt, 0, sizeof rt);
  set_sin(&rt.rt_dst, INADDR_ANY);
  set_sin(&rt.rt_genmask, INADDR_ANY);
  set_sin(&rt.rt_gateway, gw);
  rt.rt_flags = RTF_UP | (gw ? RTF_GATEWAY : 0);
  rt.rt_dev = (char *)IFACE;
  return ioctl(s, op, &rt);
}

/* Replaces /etc/resolv.conf (a symlink included) when its content differs. */
static void write_resolv(const char *gw) {
  char want[128];
  int n = snprintf(want, sizeof want, "# written by sandtree\nnameserver %s\n", gw);
  char have[128];
  int fd = open("/etc/resolv.conf", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t got = read(fd, have, sizeof have);
    close(fd);
    if (got == n && memcmp(have, want, (size_t)n) == 0) return;
  }
  fd = open("/etc/.resolv.conf.sandtree", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) { agent_log("resolv.conf: %s", strerror(errno)); return; }
  ssize_t w = write(fd, want, (size_t)n);
  close(fd);
  if (w != n || rename("/etc/.resolv.conf.sandtree", "/etc/resolv.conf") < 0)
    agent_log("resolv.conf: %s", strerror(errno));
}

/* At boot: eth0 up without an address. Opening virtio-net fills its receive ring (hundreds of
 * buffers, slow under TCG); done here, a template's clones inherit a ready link and the HELLO's
 * TAG_NET only sets addresses. */
void net_boot(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return;
  if (if_flags(s, IFF_UP, 0) < 0 && errno != ENODEV) agent_log("net: eth0 up: %s", strerror(errno));
  close(s);
}

void net_apply(const char *spec) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) { agent_log("net: socket: %s", strerror(errno)); return; }
  if (strcmp(spec, "-") == 0) {
    /* No network for this sandbox (or a clone of one that had it): address gone, link down. */
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, IFACE);
    set_sin(&ifr.ifr_addr, INADDR_ANY);
    if (current_addr(s)) ioctl(s, SIOCSIFADDR, &ifr);
    if_flags(s, 0, IFF_UP);
    close(s);
    return;
  }
  char addr[32], gw[32];
  unsigned prefix;
  struct in_addr a, g;
  if (sscanf(spec, "%31[0-9.]/%u %31[0-9.]", addr, &prefix, gw) != 3 || prefix < 1 || prefix > 30 ||
      inet_pton(AF_INET, addr, &a) != 1 || inet_pton(AF_INET, gw, &g) != 1) {
    agent_log("net: bad spec '%s'", spec);
    close(s);
    return;
  }
  in_addr_t old = current_addr(s);
  if (old != a.s_addr) {
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, IFACE);
    set_sin(&ifr.ifr_addr, a.s_addr);
    if (ioctl(s, SIOCSIFADDR, &ifr) < 0) agent_log("net: address: %s", strerror(errno));
    set_sin(&ifr.ifr_netmask, htonl(0xffffffffu << (32 - prefix)));
    if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0) agent_log("net: netmask: %s", strerror(errno));
    net_abort_stale(old);
  }
  if (if_flags(s, IFF_UP | IFF_RUNNING, 0) < 0) agent_log("net: up: %s", strerror(errno));
  /* The old default route (a clone's source's gateway) goes, the new one comes. */
  for (int i = 0; i < 8 && route_default(s, SIOCDELRT, 0) == 0; i++) {}
  if (route_default(s, SIOCADDRT, g.s_addr) < 0 && errno != EEXIST)
    agent_log("net: default route: %s", strerror(errno));
  close(s);
  write_resolv(gw);
}

/* Aborts the TCP connections of an address eth0 no longer has. A clone of a memory checkpoint
 * takes its own address, but its sockets still name its source's: every packet they send is
 * dropped (the host's anti-spoofing), and a connection stuck in zero-window probing never times
 * out. Aborting them (SOCK_DESTROY, as Android does on an address change) makes their owners
 * see ECONNABORTED and reconnect from the new address at once: the kernel's NFS client of a
 * mounted volume reconnects by itself. */
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"

struct diag_msg {
  struct nlmsghdr nlh;
  struct inet_diag_req_v2 req;
};

static int send_req(int fd, uint16_t type, uint16_t flags, const struct inet_diag_sockid *id) {
  struct diag_msg m;
  memset(&m, 0, sizeof m);
  m.nlh.nlmsg_len = sizeof m;
  m.nlh.nlmsg_type = type;
  m.nlh.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
  m.req.sdiag_family = AF_INET;
  m.req.sdiag_protocol = IPPROTO_TCP;
  m.req.idiag_states = ~(1u << 10); /* every state but LISTEN */
  if (id) m.req.id = *id;
  struct sockaddr_nl to = {.nl_family = AF_NETLINK};
  return sendto(fd, &m, sizeof m, 0, (struct sockaddr *)&to, sizeof to) < 0 ? -1 : 0;
}

void net_abort_stale(uint32_t old_addr) {
  if (!old_addr) return;
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) { agent_log("net: sock_diag: %s", strerror(errno)); return; }
  struct timeval tv = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct inet_diag_sockid stale[64];
  int n = 0, done = 0;
  if (send_req(fd, SOCK_DIAG_BY_FAMILY, NLM_F_DUMP, NULL) < 0) done = 1;
  static char buf[32768];
  while (!done) {
    ssize_t len = recv(fd, buf, sizeof buf, 0);
    if (len <= 0) break;
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) { done = 1; break; }
      struct inet_diag_msg *d = NLMSG_DATA(h);
      if (d->id.idiag_src[0] == old_addr && n < 64) stale[n++] = d->id;
    }
  }
  int aborted = 0;
  for (int i = 0; i < n; i++) {
    if (send_req(fd, SOCK_DESTROY, NLM_F_ACK, &stale[i]) < 0) continue;
    ssize_t len = recv(fd, buf, sizeof buf, 0);
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    if (len > 0 && h->nlmsg_type == NLMSG_ERROR && ((struct nlmsgerr *)NLMSG_DATA(h))->error == 0) aborted++;
  }
  if (n) agent_log("net: aborted %d of %d connections of the old address", aborted, n);
  close(fd);
}

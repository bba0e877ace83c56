/* Shared state of the agent's single-threaded event loop. */
#ifndef SANDTREE_AGENT_H
#define SANDTREE_AGENT_H
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "json.h"
#include "req.h"

enum stream_kind { S_EXEC, S_FWRITE, S_FREAD, S_LIST };

struct stream {
  struct stream *next;
  uint32_t id;
  enum stream_kind kind;
  int detached;    /* forgotten by a HELLO: keeps running, sends nothing */
  int dead;        /* ended; freed by the loop's sweep */
  uint64_t credit; /* bytes we may still send on this stream (STDOUT+STDERR+DATA) */
  /* exec */
  pid_t pid;
  int out_fd, err_fd, in_fd;
  int exited, status, timed_out;
  uint64_t deadline_ms; /* 0: none */
  uint8_t *inbuf;       /* STDIN bytes not yet written to the child */
  size_t in_len, in_cap;
  int in_close; /* STDIN_CLOSE seen: close the pipe once inbuf is written */
  int pty;      /* out_fd is a pty master (in_fd a dup of it); err_fd unused */
  uint64_t drain_ms; /* pty: after exit, wait for EIO on the master until then */
  uint64_t hold_us;  /* pipes: not polled before this (now_us), see HOLD_US in exec.c */
  /* files */
  int fd;
  DIR *dir;
  uint64_t bytes, remaining;
  int bounded;
};

/* agent.c */
extern struct stream *g_streams;
struct stream *stream_new(uint32_t id, enum stream_kind kind);
void stream_end(struct stream *s); /* marks dead and releases its resources */
uint64_t now_ms(void);
uint64_t now_us(void);
int outq_room(void); /* 1 while the outgoing queue is below its high-water mark */
void send_frame(uint8_t type, uint32_t stream, const void *p, size_t n);
void send_json(uint8_t type, uint32_t stream, struct jbuf *j); /* frees j */
void send_error(uint32_t stream, int err, const char *msg);
void send_window(uint32_t stream, uint32_t n);
/* Reads up to max bytes from fd (until EAGAIN or end of file) straight into one new frame of
 * the queue. Returns the bytes queued, or read()'s 0 / -1 when there were none. */
ssize_t send_read(uint8_t type, uint32_t stream, int fd, size_t max);
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *errno_code(int err);

/* exec.c */
void exec_start(uint32_t id, struct req *r);
void exec_frame(struct stream *s, uint8_t type, const uint8_t *p, size_t n);
void exec_reaped(pid_t pid, int status);
void exec_pump(struct stream *s, int fd, short revents);
void exec_tick(struct stream *s, uint64_t now);
void exec_detach(struct stream *s);

/* files.c */
void files_request(uint8_t type, uint32_t id, struct req *r);
void files_frame(struct stream *s, uint8_t type, const uint8_t *p, size_t n);
void files_pump(struct stream *s); /* FILE_READ / LIST: produce within credit */

/* session.c */
void session_ready(void);                          /* READY, once the port is open */
void session_hello(const uint8_t *p, size_t n);    /* HELLO: sync, forget streams, HELLO_ACK */
void session_sync(const uint8_t *p, size_t n);     /* SYNC (and HELLO's payload) */

/* fsfreeze.c */
void fs_request(uint8_t type, uint32_t id, struct req *r); /* FSFREEZE / FSTHAW */

/* users.c */
struct user_info {
  uid_t uid;
  gid_t gid;
  char home[256], name[64];
  gid_t groups[64];
  int ngroups;
};
int user_lookup(const char *spec, struct user_info *u); /* 0 or errno */

/* init.c */
int init_boot(void);        /* PID-1 setup up to the switched root; 0 or -1 */
void init_mount_root(uint64_t bytes); /* TAG_ROOT: mount the waiting root disk, switch into it */
extern const char *g_root_state;      /* "mounted", "waiting" (sandtree.root=wait) or "failed" */
void init_poweroff(void);   /* SHUTDOWN: never returns */

/* net.c */
void net_apply(const char *spec); /* TAG_NET: configure eth0, the default route, resolv.conf */
int mount_main(int argc, char **argv); /* `/proc/1/exe mount ...` (mounthelp.c) */
void net_abort_stale(uint32_t old_addr); /* TCP connections of a former eth0 address (net-abort.c) */
void net_boot(void);              /* eth0 up, no address (when there is one) */
extern char g_kernel_release[65];
extern uint64_t g_boot_ms;

#endif

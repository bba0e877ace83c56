/* Decoding of request payloads (TLV) into plain structs. Pure, so the fuzzer covers it. */
#ifndef SANDTREE_REQ_H
#define SANDTREE_REQ_H
#include <stddef.h>
#include <stdint.h>

struct req {
  char **argv; size_t argc;  /* NULL-terminated; strings are NUL-terminated copies */
  char **env; size_t envc;
  char *cwd, *user, *shell, *path, *net;
  const uint8_t *entropy; uint32_t entropy_len; /* points into the payload */
  uint64_t timeout_ms, offset, length, time_ns, root_bytes;
  uint32_t mode, flags, signum, rows, cols;
  unsigned has_timeout : 1, has_offset : 1, has_length : 1, has_mode : 1, has_time : 1,
      has_signum : 1, has_rows : 1, has_cols : 1, has_root : 1;
};

/* Returns 0, or an errno (EINVAL for malformed entries, ENOMEM). On error *r is freed. */
int req_decode(const uint8_t *p, size_t len, struct req *r);
void req_free(struct req *r);

#endif

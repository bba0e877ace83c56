#include "req.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "proto.h"

static char *dupstr(const struct tlv *t) {
  char *s = malloc((size_t)t->len + 1);
  if (!s) return NULL;
  memcpy(s, t->val, t->len);
  s[t->len] = 0;
  return s;
}

/* Appends to a NULL-terminated vector. */
static int push(char ***v, size_t *n, const struct tlv *t) {
  char **nv = realloc(*v, (*n + 2) * sizeof **v);
  if (!nv) return ENOMEM;
  *v = nv;
  if (!(nv[*n] = dupstr(t))) return ENOMEM;
  nv[++*n] = NULL;
  return 0;
}

/* A repeated singular string: the last one wins. */
static int set(char **dst, const struct tlv *t) {
  char *s = dupstr(t);
  if (!s) return ENOMEM;
  free(*dst);
  *dst = s;
  return 0;
}

static int one(struct req *r, const struct tlv *t) {
  switch (t->tag) {
    case TAG_ARG: case TAG_ENV: case TAG_CWD: case TAG_USER: case TAG_SHELL: case TAG_PATH:
    case TAG_NET:
      if (!tlv_str_ok(t)) return EINVAL;
      break;
  }
  switch (t->tag) {
    case TAG_ARG: return push(&r->argv, &r->argc, t);
    case TAG_ENV: return push(&r->env, &r->envc, t);
    case TAG_CWD: return set(&r->cwd, t);
    case TAG_USER: return set(&r->user, t);
    case TAG_SHELL: return set(&r->shell, t);
    case TAG_PATH: return set(&r->path, t);
    case TAG_NET: return set(&r->net, t);
    case TAG_TIMEOUT_MS: r->has_timeout = 1; return tlv_u64(t, &r->timeout_ms) ? EINVAL : 0;
    case TAG_OFFSET: r->has_offset = 1; return tlv_u64(t, &r->offset) ? EINVAL : 0;
    case TAG_LENGTH: r->has_length = 1; return tlv_u64(t, &r->length) ? EINVAL : 0;
    case TAG_TIME_NS: r->has_time = 1; return tlv_u64(t, &r->time_ns) ? EINVAL : 0;
    case TAG_ROOT: r->has_root = 1; return tlv_u64(t, &r->root_bytes) ? EINVAL : 0;
    case TAG_MODE: r->has_mode = 1; return tlv_u32(t, &r->mode) ? EINVAL : 0;
    case TAG_FLAGS: return tlv_u32(t, &r->flags) ? EINVAL : 0;
    case TAG_SIGNUM: r->has_signum = 1; return tlv_u32(t, &r->signum) ? EINVAL : 0;
    case TAG_ROWS: r->has_rows = 1; return tlv_u32(t, &r->rows) ? EINVAL : 0;
    case TAG_COLS: r->has_cols = 1; return tlv_u32(t, &r->cols) ? EINVAL : 0;
    case TAG_ENTROPY: r->entropy = t->val; r->entropy_len = t->len; return 0;
    default: return 0; /* unknown tags are ignored */
  }
}

int req_decode(const uint8_t *p, size_t len, struct req *r) {
  memset(r, 0, sizeof *r);
  size_t off = 0;
  struct tlv t;
  int k, err = 0;
  while ((k = tlv_next(p, len, &off, &t)) == 1)
    if ((err = one(r, &t))) break;
  if (k < 0) err = EINVAL;
  if (err) req_free(r);
  return err;
}

static void freev(char **v) {
  if (!v) return;
  for (char **s = v; *s; s++) free(*s);
  free(v);
}

void req_free(struct req *r) {
  freev(r->argv);
  freev(r->env);
  free(r->cwd); free(r->user); free(r->shell); free(r->path); free(r->net);
  memset(r, 0, sizeof *r);
}

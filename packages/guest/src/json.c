#include "json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jb_init(struct jbuf *j) { memset(j, 0, sizeof *j); }

void jb_free(struct jbuf *j) {
  free(j->p);
  jb_init(j);
}

static int grow(struct jbuf *j, size_t n) {
  if (j->oom) return -1;
  if (j->len + n + 1 <= j->cap) return 0;
  size_t cap = j->cap ? j->cap : 128;
  while (cap < j->len + n + 1) cap *= 2;
  char *p = realloc(j->p, cap);
  if (!p) { j->oom = 1; return -1; }
  j->p = p;
  j->cap = cap;
  return 0;
}

void jb_raw(struct jbuf *j, const char *s, size_t n) {
  if (grow(j, n)) return;
  memcpy(j->p + j->len, s, n);
  j->len += n;
  j->p[j->len] = 0;
}

void jb_lit(struct jbuf *j, const char *s) { jb_raw(j, s, strlen(s)); }

/* Escapes quote, backslash and control bytes; other bytes pass through unchanged (file
 * names that are not UTF-8 reach the host as replacement characters). */
void jb_str(struct jbuf *j, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  jb_raw(j, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char e[6];
    if (c == '"' || c == '\\') { e[0] = '\\'; e[1] = (char)c; jb_raw(j, e, 2); }
    else if (c == '\n') jb_raw(j, "\\n", 2);
    else if (c == '\t') jb_raw(j, "\\t", 2);
    else if (c == '\r') jb_raw(j, "\\r", 2);
    else if (c < 0x20 || c == 0x7f) {
      memcpy(e, "\\u00", 4); e[4] = hex[c >> 4]; e[5] = hex[c & 15];
      jb_raw(j, e, 6);
    } else jb_raw(j, (const char *)&c, 1);
  }
  jb_raw(j, "\"", 1);
}

void jb_int(struct jbuf *j, int64_t v) {
  char b[24];
  int n = snprintf(b, sizeof b, "%" PRId64, v);
  jb_raw(j, b, (size_t)n);
}

void jb_key(struct jbuf *j, const char *key) {
  if (j->len > 0 && j->p[j->len - 1] != '{') jb_raw(j, ",", 1);
  jb_str(j, key, strlen(key));
  jb_raw(j, ":", 1);
}

/* A tiny append-only JSON writer: enough for the agent's flat response objects. */
#ifndef SANDTREE_JSON_H
#define SANDTREE_JSON_H
#include <stddef.h>
#include <stdint.h>

struct jbuf {
  char *p;
  size_t len, cap;
  int oom; /* set when an allocation failed; the output is then truncated */
};

void jb_init(struct jbuf *j);
void jb_free(struct jbuf *j);
void jb_raw(struct jbuf *j, const char *s, size_t n);
void jb_lit(struct jbuf *j, const char *s);
void jb_str(struct jbuf *j, const char *s, size_t n); /* quoted and escaped */
void jb_int(struct jbuf *j, int64_t v);
/* ,"key": with the comma only when the object already has a member */
void jb_key(struct jbuf *j, const char *key);

#endif

/* libFuzzer harness for the parsers that see untrusted bytes: the incremental frame reader
 * (fed in chunks whose sizes come from the input, so resync and split headers are
 * exercised), the TLV walker and request decoding, and the JSON string writer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "json.h"
#include "proto.h"
#include "req.h"

#define MAXP 4096 /* a small maximum makes the oversize-length path reachable */

static void check_frame(const struct frame *f) {
  if (f->len > MAXP) abort();
  struct req r;
  if (req_decode(f->payload, f->len, &r) == 0) {
    for (size_t i = 0; i < r.argc; i++) if (strlen(r.argv[i]) > f->len) abort();
    struct jbuf j;
    jb_init(&j);
    if (r.path) jb_str(&j, r.path, strlen(r.path));
    jb_free(&j);
    req_free(&r);
  }
  if (f->type == T_HELLO && f->len >= HELLO_NONCE) {
    if (req_decode(f->payload + HELLO_NONCE, f->len - HELLO_NONCE, &r) == 0) req_free(&r);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t buf[MAXP];
  struct frame_parser p;
  frame_parser_init(&p, buf, MAXP);
  if (size == 0) return 0;
  size_t step = (size_t)(data[0] % 17) + 1, off = 1;
  while (off < size) {
    size_t n = size - off < step ? size - off : step;
    size_t used = 0;
    while (used < n) {
      struct frame f;
      int got;
      size_t k = frame_push(&p, data + off + used, n - used, &f, &got);
      if (k == 0 && !got) abort(); /* must always make progress */
      used += k;
      if (got) check_frame(&f);
    }
    off += n;
  }
  /* The whole input as one request payload, too. */
  struct req r;
  if (req_decode(data, size, &r) == 0) req_free(&r);
  struct jbuf j;
  jb_init(&j);
  jb_str(&j, (const char *)data, size);
  jb_free(&j);
  return 0;
}

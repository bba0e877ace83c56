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
  /* Odd first bytes: pause at each header as the agent does; bit 5 takes the payload directly
   * (skipped here, as the agent writes it to a file) instead of pushing on to collect it. */
  p.pause_at_header = data[0] & 1;
  int direct = (data[0] & 32) != 0;
  uint32_t skip = 0;
  while (off < size) {
    size_t n = size - off < step ? size - off : step;
    size_t used = 0;
    while (used < n) {
      if (skip) {
        size_t k = n - used < skip ? n - used : skip;
        used += k;
        skip -= (uint32_t)k;
        continue;
      }
      struct frame f;
      int got;
      size_t k = frame_push(&p, data + off + used, n - used, &f, &got);
      if (k == 0 && !got) abort(); /* must always make progress */
      used += k;
      if (got == 2 && (p.need == 0 || p.need > p.max || p.hlen != FRAME_HDR)) abort();
      if (got == 2 && direct) {
        skip = p.need;
        frame_parser_reset(&p);
      }
      if (got == 1) check_frame(&f);
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

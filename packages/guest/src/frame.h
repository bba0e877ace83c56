/* Pure (no I/O) parsers: an incremental frame reader with magic resync, and a bounds-checked
 * TLV walker. Both run on untrusted bytes, so the fuzzer links exactly this file. */
#ifndef SANDTREE_FRAME_H
#define SANDTREE_FRAME_H
#include <stddef.h>
#include <stdint.h>

struct frame {
  uint8_t type, flags;
  uint32_t stream;
  uint32_t len;
  const uint8_t *payload; /* valid until the next frame_push call */
};

struct frame_parser {
  uint8_t hdr[12];
  size_t hlen;      /* header bytes collected */
  uint32_t need;    /* payload length of the current frame */
  uint32_t have;    /* payload bytes collected */
  uint32_t max;     /* largest accepted payload */
  uint8_t *buf;     /* max bytes, owned by the caller */
  uint64_t resyncs; /* bytes dropped while hunting for a magic (diagnostics) */
};

void frame_parser_init(struct frame_parser *p, uint8_t *buf, uint32_t max);
void frame_parser_reset(struct frame_parser *p);
/* Consumes bytes from data until one frame completes or data runs out. Returns the number of
 * bytes consumed; *out is filled and *got set to 1 when a frame completed. */
size_t frame_push(struct frame_parser *p, const uint8_t *data, size_t len, struct frame *out,
                  int *got);
void frame_header(uint8_t hdr[12], uint8_t type, uint32_t stream, uint32_t len);

static inline uint32_t rd32(const uint8_t *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static inline uint64_t rd64(const uint8_t *b) { return rd32(b) | (uint64_t)rd32(b + 4) << 32; }
static inline void wr32(uint8_t *b, uint32_t v) {
  b[0] = (uint8_t)v; b[1] = (uint8_t)(v >> 8); b[2] = (uint8_t)(v >> 16); b[3] = (uint8_t)(v >> 24);
}

struct tlv {
  uint8_t tag;
  uint32_t len;
  const uint8_t *val;
};
/* Next entry at *off. Returns 1 with *t filled, 0 at the clean end, -1 if an entry runs past
 * the payload. */
int tlv_next(const uint8_t *p, size_t len, size_t *off, struct tlv *t);
/* Typed accessors; -1 when the size is wrong (a string with a NUL byte is wrong too). */
int tlv_u32(const struct tlv *t, uint32_t *v);
int tlv_u64(const struct tlv *t, uint64_t *v);
int tlv_str_ok(const struct tlv *t);

#endif

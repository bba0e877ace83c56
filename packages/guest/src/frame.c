#include "frame.h"

#include <string.h>

#include "proto.h"

void frame_parser_init(struct frame_parser *p, uint8_t *buf, uint32_t max) {
  memset(p, 0, sizeof *p);
  p->buf = buf;
  p->max = max;
}

void frame_parser_reset(struct frame_parser *p) {
  p->hlen = 0;
  p->need = p->have = 0;
}

void frame_header(uint8_t hdr[12], uint8_t type, uint32_t stream, uint32_t len) {
  hdr[0] = FRAME_MAGIC0;
  hdr[1] = FRAME_MAGIC1;
  hdr[2] = type;
  hdr[3] = 0;
  wr32(hdr + 4, stream);
  wr32(hdr + 8, len);
}

/* Feeds one header byte. On a complete header with an oversize length, drops its first byte
 * and keeps the rest from the next magic candidate on, so a magic inside garbage is still
 * found. Returns 1 when a complete, valid header is collected. */
static int header_byte(struct frame_parser *p, uint8_t c) {
  if (p->hlen == 0 && c != FRAME_MAGIC0) { p->resyncs++; return 0; }
  if (p->hlen == 1 && c != FRAME_MAGIC1) {
    p->resyncs++;
    p->hlen = (c == FRAME_MAGIC0) ? 1 : 0; /* "54 54 53" still starts a magic */
    return 0;
  }
  p->hdr[p->hlen++] = c;
  if (p->hlen < FRAME_HDR) return 0;
  if (rd32(p->hdr + 8) <= p->max) return 1;
  size_t k = 1;
  while (k < FRAME_HDR && !(p->hdr[k] == FRAME_MAGIC0 &&
                            (k == FRAME_HDR - 1 || p->hdr[k + 1] == FRAME_MAGIC1)))
    k++;
  p->resyncs += k;
  memmove(p->hdr, p->hdr + k, FRAME_HDR - k);
  p->hlen = FRAME_HDR - k;
  return 0;
}

size_t frame_push(struct frame_parser *p, const uint8_t *data, size_t len, struct frame *out,
                  int *got) {
  size_t used = 0;
  *got = 0;
  while (used < len) {
    if (p->hlen < FRAME_HDR) {
      int r = header_byte(p, data[used++]);
      if (r <= 0) continue;
      p->need = rd32(p->hdr + 8);
      p->have = 0;
      if (p->need > 0) continue;
    } else {
      size_t take = p->need - p->have;
      if (take > len - used) take = len - used;
      memcpy(p->buf + p->have, data + used, take);
      p->have += (uint32_t)take;
      used += take;
      if (p->have < p->need) continue;
    }
    out->type = p->hdr[2];
    out->flags = p->hdr[3];
    out->stream = rd32(p->hdr + 4);
    out->len = p->need;
    out->payload = p->buf;
    p->hlen = 0;
    *got = 1;
    return used;
  }
  return used;
}

int tlv_next(const uint8_t *p, size_t len, size_t *off, struct tlv *t) {
  if (*off >= len) return 0;
  if (len - *off < 5) return -1;
  t->tag = p[*off];
  t->len = rd32(p + *off + 1);
  if (t->len > len - *off - 5) return -1;
  t->val = p + *off + 5;
  *off += 5 + (size_t)t->len;
  return 1;
}

int tlv_u32(const struct tlv *t, uint32_t *v) {
  if (t->len != 4) return -1;
  *v = rd32(t->val);
  return 0;
}

int tlv_u64(const struct tlv *t, uint64_t *v) {
  if (t->len != 8) return -1;
  *v = rd64(t->val);
  return 0;
}

int tlv_str_ok(const struct tlv *t) { return memchr(t->val, 0, t->len) == NULL; }

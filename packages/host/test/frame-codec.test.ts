// The host's frame decoder: frames split across socket reads at any point, frames larger than
// a read (joined once), and resynchronisation after garbage.
import { randomBytes } from "node:crypto";
import { FRAME_MAX_PAYLOAD } from "@sandtree/protocol";
import { describe, expect, it } from "vitest";
import { encodeFrame, type Frame, FrameDecoder } from "../src/agent/frame-codec.js";

function feed(decoder: FrameDecoder, bytes: Buffer, sizes: number[]): Frame[] {
  const out: Frame[] = [];
  let off = 0;
  for (let i = 0; off < bytes.length; i++) {
    const n = sizes[i % sizes.length] ?? 1;
    out.push(...decoder.push(bytes.subarray(off, off + n)));
    off += n;
  }
  return out;
}

const summary = (fs: Frame[]) => fs.map((f) => ({ type: f.type, stream: f.stream, payload: f.payload.toString("hex") }));

describe("FrameDecoder", () => {
  const frames = [
    encodeFrame(0x40, 7, randomBytes(100)),
    encodeFrame(0x14, 7, Buffer.from([1, 0, 0, 0])),
    encodeFrame(0x43, 7),
    encodeFrame(0x40, 9, randomBytes(FRAME_MAX_PAYLOAD)),
    encodeFrame(0x41, 9, randomBytes(3000)),
  ];
  const wire = Buffer.concat(frames);
  const expected = summary(new FrameDecoder().push(Buffer.from(wire)));

  it("decodes the same frames whatever the read sizes", () => {
    expect(expected).toHaveLength(frames.length);
    expect(expected[3]?.payload.length).toBe(FRAME_MAX_PAYLOAD * 2);
    for (const sizes of [[1], [11, 13], [4096], [65536], [65536, 7, 100_000], [wire.length]]) {
      expect(summary(feed(new FrameDecoder(), wire, sizes)), `reads of ${sizes.join(",")}`).toEqual(expected);
    }
  });

  it("skips garbage before, between and inside a split header", () => {
    const junk = Buffer.from([0x00, 0x54, 0x54, 0x99, 0x53]);
    const dirty = Buffer.concat([junk, frames[0] as Buffer, junk, frames[3] as Buffer]);
    const d = new FrameDecoder();
    const got = feed(d, dirty, [3, 70_000]);
    expect(summary(got)).toEqual([expected[0], expected[3]]);
    expect(d.skippedBytes).toBe(junk.length * 2);
  });
});

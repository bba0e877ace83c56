import { inflateSync } from "node:zlib";

/** A decoded 8-bit RGB or RGBA image. */
export interface Pixels {
  width: number;
  height: number;
  channels: 3 | 4;
  data: Buffer;
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * Decodes a non-interlaced 8-bit RGB or RGBA PNG (what the desktop helper writes: colour type 2),
 * all five row filters. Other kinds are refused: the screenshots compared here are ours.
 */
export function decodePng(png: Buffer): Pixels {
  if (png.length < 8 || !png.subarray(0, 8).equals(SIGNATURE)) throw new Error("not a PNG");
  let width = 0;
  let height = 0;
  let channels: 3 | 4 = 3;
  const idat: Buffer[] = [];
  for (let off = 8; off + 8 <= png.length; ) {
    const len = png.readUInt32BE(off);
    const type = png.toString("latin1", off + 4, off + 8);
    const body = png.subarray(off + 8, off + 8 + len);
    if (type === "IHDR") {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      const depth = body[8];
      const colour = body[9];
      if (depth !== 8 || (colour !== 2 && colour !== 6) || body[12] !== 0) {
        throw new Error(`unsupported PNG (bit depth ${depth}, colour type ${colour}, interlace ${body[12]})`);
      }
      channels = colour === 6 ? 4 : 3;
    } else if (type === "IDAT") idat.push(body);
    else if (type === "IEND") break;
    off += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  if (raw.length < height * (stride + 1)) throw new Error("truncated PNG data");
  const out = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const src = y * (stride + 1) + 1;
    const row = y * stride;
    for (let i = 0; i < stride; i++) {
      const x = raw[src + i] as number;
      const a = i >= channels ? (out[row + i - channels] as number) : 0;
      const b = y > 0 ? (out[row - stride + i] as number) : 0;
      const c = i >= channels && y > 0 ? (out[row - stride + i - channels] as number) : 0;
      let v: number;
      if (filter === 0) v = x;
      else if (filter === 1) v = x + a;
      else if (filter === 2) v = x + b;
      else if (filter === 3) v = x + ((a + b) >> 1);
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        v = x + (pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
      } else throw new Error(`bad PNG row filter ${filter}`);
      out[row + i] = v & 0xff;
    }
  }
  return { width, height, channels, data: out };
}

/**
 * The fraction of pixels whose colour differs by more than `tolerance` in some channel (alpha
 * ignored); 1 when the sizes differ. Clocks and blinking cursors change a few pixels; a tolerant
 * match accepts a small ratio.
 */
export function diffRatio(a: Pixels, b: Pixels, tolerance: number): number {
  if (a.width !== b.width || a.height !== b.height) return 1;
  const n = a.width * a.height;
  if (n === 0) return 0;
  let changed = 0;
  for (let p = 0; p < n; p++) {
    const ia = p * a.channels;
    const ib = p * b.channels;
    for (let ch = 0; ch < 3; ch++) {
      if (Math.abs((a.data[ia + ch] as number) - (b.data[ib + ch] as number)) > tolerance) {
        changed++;
        break;
      }
    }
  }
  return changed / n;
}

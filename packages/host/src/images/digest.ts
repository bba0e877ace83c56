import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { rm } from "node:fs/promises";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { SandtreeError } from "@sandtree/protocol";

/** Only sha256 is verified; other algorithms are refused rather than trusted blindly. */
const DIGEST_RE = /^sha256:[a-f0-9]{64}$/;

export function isDigest(value: string): boolean {
  return DIGEST_RE.test(value);
}

export function assertDigest(value: unknown, what: string): string {
  if (typeof value !== "string" || !DIGEST_RE.test(value)) {
    throw new SandtreeError("IMAGE_INVALID", `${what}: unsupported or malformed digest`, {
      digest: value,
    });
  }
  return value;
}

/** The hex part of a sha256 digest: safe as a single path component. */
export function digestHex(digest: string): string {
  return assertDigest(digest, "digest").slice("sha256:".length);
}

export function sha256Bytes(data: Uint8Array | string): string {
  return `sha256:${createHash("sha256").update(data).digest("hex")}`;
}

export async function sha256File(path: string, opts: { signal?: AbortSignal } = {}): Promise<string> {
  const hash = createHash("sha256");
  await pipeline(createReadStream(path), hash, opts.signal ? { signal: opts.signal } : {});
  return `sha256:${hash.digest("hex")}`;
}

export interface ExpectedBlob {
  digest: string;
  size?: number | undefined;
}

/**
 * Streams `source` into `dest` while hashing it; the file is deleted and IMAGE_INVALID thrown
 * when the bytes do not match the descriptor (a corrupt or lying registry or layout).
 */
export async function writeVerified(
  source: Readable | ReadableStream<Uint8Array>,
  dest: string,
  expected: ExpectedBlob,
  opts: { signal?: AbortSignal | undefined } = {},
): Promise<void> {
  const hash = createHash("sha256");
  let size = 0;
  const tap = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      hash.update(chunk);
      size += chunk.length;
      if (expected.size !== undefined && size > expected.size) {
        cb(new SandtreeError("IMAGE_INVALID", `blob ${expected.digest} is larger than declared`));
        return;
      }
      cb(null, chunk);
    },
  });
  const input = source instanceof Readable ? source : Readable.fromWeb(source as never);
  try {
    await pipeline(input, tap, createWriteStream(dest), opts.signal ? { signal: opts.signal } : {});
  } catch (e) {
    await rm(dest, { force: true });
    throw e;
  }
  const actual = `sha256:${hash.digest("hex")}`;
  if (actual !== expected.digest || (expected.size !== undefined && size !== expected.size)) {
    await rm(dest, { force: true });
    throw new SandtreeError("IMAGE_INVALID", `blob digest mismatch for ${expected.digest}`, {
      expected: expected.digest,
      actual,
      expectedSize: expected.size,
      actualSize: size,
    });
  }
}

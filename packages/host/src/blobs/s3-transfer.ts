import { createHash, randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, readdirSync, rmSync, statSync } from "node:fs";
import { open, rm, stat } from "node:fs/promises";
import path from "node:path";
import { Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { S3Client } from "@aws-sdk/client-s3";
import { BlobMissingError } from "./blob-store.js";
import { loadS3Sdk } from "./s3-sdk.js";

/** What was sent or received: the sha256 and the two forms an S3 ETag takes (whole MD5, MD5 of part MD5s). */
export interface Digests {
  sha256: string;
  size: number;
  md5: string;
  multipartEtag: string;
}

/**
 * Hashes bytes as they stream past: sha256 and MD5 of the whole, and the MD5 of each `partSize`
 * slice (lib-storage cuts parts at exactly these offsets), for the ETag of a multipart upload.
 */
class Hasher extends Transform {
  private readonly sha = createHash("sha256");
  private readonly md5 = createHash("md5");
  private part = createHash("md5");
  private partFill = 0;
  private readonly partDigests: Buffer[] = [];
  size = 0;

  constructor(private readonly partSize: number) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.sha.update(chunk);
    this.md5.update(chunk);
    this.size += chunk.length;
    for (let off = 0; off < chunk.length; ) {
      const n = Math.min(chunk.length - off, this.partSize - this.partFill);
      this.part.update(chunk.subarray(off, off + n));
      this.partFill += n;
      off += n;
      if (this.partFill === this.partSize) {
        this.partDigests.push(this.part.digest());
        this.part = createHash("md5");
        this.partFill = 0;
      }
    }
    cb(null, chunk);
  }

  digests(): Digests {
    const parts = [...this.partDigests];
    if (this.partFill > 0 || parts.length === 0) parts.push(this.part.digest());
    const multipartEtag = `${createHash("md5").update(Buffer.concat(parts)).digest("hex")}-${parts.length}`;
    return { sha256: this.sha.digest("hex"), size: this.size, md5: this.md5.digest("hex"), multipartEtag };
  }
}

/**
 * Streams `file` to `Bucket/Key` (one PutObject below `partSize`, a multipart upload above it,
 * parts retried by the client), hashing what was read. A failed multipart upload is aborted so
 * no parts are left behind (best effort; a bucket lifecycle rule for incomplete uploads is the backstop).
 */
export async function uploadFile(
  client: S3Client,
  target: { Bucket: string; Key: string; Metadata: Record<string, string> },
  file: string,
  opts: { partSize: number; queueSize: number; signal?: AbortSignal | undefined },
): Promise<Digests> {
  const { s3, storage } = await loadS3Sdk();
  // lib-storage checks the part count against the body's length, which it cannot see through a transform.
  const { size } = await stat(file);
  const hasher = new Hasher(opts.partSize);
  const source = createReadStream(file, { highWaterMark: 1024 * 1024 });
  source.on("error", (err) => hasher.destroy(err));
  source.pipe(hasher);
  const abortController = new AbortController();
  const onAbort = () => abortController.abort(opts.signal?.reason);
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const upload = new storage.Upload({
      client,
      params: { ...target, Body: hasher, ContentLength: size },
      partSize: opts.partSize,
      queueSize: opts.queueSize,
      // Parts are aborted here, best effort, so the upload's own error is the one reported
      // (a server without AbortMultipartUpload would otherwise replace it with its refusal).
      leavePartsOnError: true,
      abortController,
    });
    try {
      await upload.done();
    } catch (err) {
      if (upload.uploadId) {
        await client
          .send(new s3.AbortMultipartUploadCommand({ Bucket: target.Bucket, Key: target.Key, UploadId: upload.uploadId }))
          .catch(() => {});
      }
      throw err;
    }
    return hasher.digests();
  } finally {
    opts.signal?.removeEventListener("abort", onAbort);
    source.destroy();
  }
}

/** The temporary files of downloads into `dir` (downloadToTemp). */
const DOWNLOAD_TMP = ".tmp-dl-";

/**
 * Removes what downloads into `dir` left when a process ended during them: temporary files last
 * written before `before` (this process's start: its own downloads are younger).
 */
export function removeStaleDownloads(dir: string, before: number): void {
  for (const f of readdirSync(dir)) {
    if (!f.startsWith(DOWNLOAD_TMP)) continue;
    const file = path.join(dir, f);
    try {
      if (statSync(file).mtimeMs < before) rmSync(file, { force: true });
    } catch {}
  }
}

/**
 * Downloads `Bucket/Key` into a temporary file in `dir` (fsynced), hashing what arrives; the
 * caller checks the hash and renames. On any failure the temporary file is removed.
 * An absent object is BlobMissingError.
 */
export async function downloadToTemp(
  client: S3Client,
  source: { Bucket: string; Key: string; key: string },
  dir: string,
  opts: { signal?: AbortSignal | undefined },
): Promise<{ tmp: string; digests: Digests }> {
  const { s3 } = await loadS3Sdk();
  const tmp = path.join(dir, `${DOWNLOAD_TMP}${source.key}-${randomBytes(4).toString("hex")}`);
  try {
    let body: NodeJS.ReadableStream;
    try {
      const res = await client.send(
        new s3.GetObjectCommand({ Bucket: source.Bucket, Key: source.Key }),
        opts.signal ? { abortSignal: opts.signal } : {},
      );
      if (!res.Body) throw new Error(`GetObject ${source.Key} returned no body`);
      body = res.Body as NodeJS.ReadableStream;
    } catch (err) {
      const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
      if (e.name === "NoSuchKey" || e.$metadata?.httpStatusCode === 404) throw new BlobMissingError(source.key);
      throw err;
    }
    const hasher = new Hasher(Number.MAX_SAFE_INTEGER);
    await pipeline(body, hasher, createWriteStream(tmp, { flags: "wx" }), opts.signal ? { signal: opts.signal } : {});
    const fd = await open(tmp, "r+");
    try {
      await fd.sync();
    } finally {
      await fd.close();
    }
    return { tmp, digests: hasher.digests() };
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

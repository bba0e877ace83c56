import { mkdirSync } from "node:fs";
import { rm, stat } from "node:fs/promises";
import path from "node:path";
import type { HeadObjectCommandOutput, S3Client, S3ClientConfig } from "@aws-sdk/client-s3";
import { sha256File } from "../disks/layers.js";
import { renameKeepingGrants } from "../vmm/jail.js";
import { assertBlobKey, BlobCorruptError, type BlobStore } from "./blob-store.js";
import { TransientError, withRetries } from "./retry.js";
import { loadS3Sdk, type S3Sdk } from "./s3-sdk.js";
import { type Digests, downloadToTemp, removeStaleDownloads, uploadFile } from "./s3-transfer.js";
import { syncDir, VerifiedCache } from "./verified-cache.js";

export interface S3BlobStoreOptions {
  bucket: string;
  /** Prepended to every key ("team-a/"), so several deployments can share a bucket. */
  prefix?: string;
  /** An S3-compatible endpoint (MinIO, R2, Ceph RGW); unset: AWS S3. */
  endpoint?: string;
  /** Unset: AWS_REGION / the SDK's default chain, else us-east-1. */
  region?: string;
  /** bucket in the path (`http://host/bucket/key`), which most self-hosted servers need. */
  forcePathStyle?: boolean;
  /** Compare the ETag with the MD5 of what was sent (off for SSE-KMS buckets, whose ETags are not MD5s). */
  verifyEtag?: boolean;
  /** The local cache: materialized layers live here side by side. */
  localDir: string;
  /** Multipart part size in bytes (default 16 MiB, at least 5 MiB: S3's minimum). */
  partSize?: number;
  /** Parts in flight at once (default 4). */
  queueSize?: number;
  /** Tries of each request (the SDK's retries) and of each whole transfer (default 5). */
  maxAttempts?: number;
  /** Extra client settings (tests give credentials here); normally the SDK's default chain. */
  clientConfig?: S3ClientConfig;
}

const MIB = 1024 * 1024;

/**
 * Blobs in an S3-compatible bucket, with a local cache in `localDir` (qcow2 layers name their
 * parent by a relative file name, so a restore needs the chain as files side by side). Uploads
 * stream the file (multipart above the part size) with its sha256 and size as object metadata,
 * and are checked afterwards (HeadObject: size, metadata, ETag). Downloads are hashed while they
 * stream into a temporary file, fsynced and renamed into place only when the hash matches.
 */
export class S3BlobStore implements BlobStore {
  readonly localDir: string;
  private readonly clientConfig: S3ClientConfig;
  private connected: Promise<{ client: S3Client; s3: S3Sdk["s3"] }> | null = null;
  private client: S3Client | null = null;
  private closed = false;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly partSize: number;
  private readonly queueSize: number;
  private readonly attempts: number;
  private readonly verifyEtag: boolean;
  private readonly cache: VerifiedCache;
  private readonly inflight = new Map<string, { abort: AbortController; waiting: number; done: Promise<string> }>();

  constructor(opts: S3BlobStoreOptions) {
    this.localDir = opts.localDir;
    mkdirSync(this.localDir, { recursive: true });
    // A restart finds what a download the previous process was in left (never one of this process's).
    removeStaleDownloads(this.localDir, performance.timeOrigin);
    this.bucket = opts.bucket;
    this.prefix = opts.prefix ?? "";
    this.partSize = Math.max(5 * MIB, opts.partSize ?? 16 * MIB);
    this.queueSize = opts.queueSize ?? 4;
    this.attempts = opts.maxAttempts ?? 5;
    this.verifyEtag = opts.verifyEtag ?? true;
    this.cache = new VerifiedCache(this.localDir);
    this.clientConfig = {
      ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
      region: opts.region ?? "us-east-1",
      forcePathStyle: opts.forcePathStyle ?? false,
      maxAttempts: this.attempts,
      // Only what the operation requires: many S3-compatible servers refuse the SDK's default
      // trailing CRC32 checksums; the sha256 this store checks on both ends covers the bytes.
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
      ...opts.clientConfig,
    };
  }

  /** The client, made on first use (the SDK is loaded only then). */
  private sdk(): Promise<{ client: S3Client; s3: S3Sdk["s3"] }> {
    this.connected ??= loadS3Sdk().then(({ s3 }) => {
      this.client = new s3.S3Client(this.clientConfig);
      if (this.closed) this.client.destroy();
      return { client: this.client, s3 };
    });
    return this.connected;
  }

  /** Where the store keeps its objects, for logs: `s3://bucket/prefix`. */
  get description(): string {
    return `s3://${this.bucket}/${this.prefix}`;
  }

  private objectKey(key: string): string {
    assertBlobKey(key);
    return `${this.prefix}${key}`;
  }

  async put(
    key: string,
    file: string,
    meta: { sha256: string; size: number },
    opts: { signal?: AbortSignal } = {},
  ): Promise<void> {
    await this.upload(key, file, meta, opts.signal);
    await this.adopt(key, file, meta.sha256);
  }

  async replace(
    key: string,
    file: string,
    meta: { sha256: string; size: number },
    commit: () => boolean | Promise<boolean>,
    opts: { signal?: AbortSignal } = {},
  ): Promise<boolean> {
    let committed = false;
    try {
      await this.upload(key, file, meta, opts.signal);
      committed = await commit();
    } finally {
      if (!committed) await rm(file, { force: true });
    }
    if (!committed) return false;
    await this.adopt(key, file, meta.sha256);
    return true;
  }

  /** Moves an uploaded file into the local cache (unless it is there already), marked verified. */
  private async adopt(key: string, file: string, sha256: string): Promise<void> {
    const dest = path.join(this.localDir, key);
    if (path.resolve(file) !== dest) {
      await this.cache.forget(key);
      await renameKeepingGrants(file, dest);
    }
    await syncDir(this.localDir);
    await this.cache.mark(key, sha256);
  }

  /** Streams `file` to the bucket as `key`, checked on the way (sha256) and after (HeadObject); retried. */
  private async upload(key: string, file: string, meta: { sha256: string; size: number }, signal?: AbortSignal): Promise<void> {
    const Key = this.objectKey(key);
    const opts = { signal };
    const { client, s3 } = await this.sdk();
    await withRetries(
      async () => {
        const sent = await uploadFile(
          client,
          { Bucket: this.bucket, Key, Metadata: { sha256: meta.sha256, size: String(meta.size) } },
          file,
          { partSize: this.partSize, queueSize: this.queueSize, signal: opts.signal },
        );
        if (sent.sha256 !== meta.sha256 || sent.size !== meta.size) {
          // The file is not what the caller recorded: the object must not stand for it.
          await client.send(new s3.DeleteObjectCommand({ Bucket: this.bucket, Key })).catch(() => {});
          throw new BlobCorruptError(key, meta.sha256, sent.sha256);
        }
        await this.checkStored(key, sent, opts.signal);
      },
      { attempts: this.attempts, signal },
    );
  }

  /** After an upload: the object has the size, metadata and (where meaningful) ETag of what was sent. */
  private async checkStored(key: string, sent: Digests, signal: AbortSignal | undefined): Promise<void> {
    const head = await this.head(key, signal);
    const problems: string[] = [];
    if (!head) problems.push("the object is absent after its upload");
    else {
      if (head.ContentLength !== sent.size) problems.push(`size ${head.ContentLength} != ${sent.size} sent`);
      if (head.Metadata?.sha256 !== sent.sha256) problems.push(`sha256 metadata ${head.Metadata?.sha256 ?? "(none)"} != sent`);
      const etag = head.ETag?.replace(/"/g, "");
      if (this.verifyEtag && etag && etag !== sent.md5 && etag !== sent.multipartEtag) {
        problems.push(`ETag ${etag} matches neither the MD5 nor the multipart MD5 of what was sent`);
      }
    }
    if (problems.length > 0) {
      throw new TransientError(`upload of ${key} to ${this.description} did not verify: ${problems.join("; ")}`);
    }
  }

  private async head(key: string, signal?: AbortSignal): Promise<HeadObjectCommandOutput | null> {
    const { client, s3 } = await this.sdk();
    try {
      return await client.send(
        new s3.HeadObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }),
        signal ? { abortSignal: signal } : {},
      );
    } catch (err) {
      const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
      if (e.name === "NotFound" || e.name === "NoSuchKey" || e.$metadata?.httpStatusCode === 404) return null;
      throw err;
    }
  }

  async materialize(key: string, expectedSha256: string, opts: { signal?: AbortSignal } = {}): Promise<string> {
    assertBlobKey(key);
    opts.signal?.throwIfAborted();
    // Concurrent restores of one chain share one download, aborted once every caller gave up.
    const id = `${key}\0${expectedSha256}`;
    let shared = this.inflight.get(id);
    if (!shared) {
      const abort = new AbortController();
      const entry = {
        abort,
        waiting: 0,
        done: this.materializeOnce(key, expectedSha256, abort.signal).finally(() => this.inflight.delete(id)),
      };
      shared = entry;
      this.inflight.set(id, entry);
    }
    const entry = shared;
    entry.waiting++;
    const { signal } = opts;
    if (!signal) return entry.done;
    return new Promise<string>((resolve, reject) => {
      const onAbort = () => {
        if (--entry.waiting === 0) entry.abort.abort(signal.reason);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      entry.done.then(
        (p) => {
          signal.removeEventListener("abort", onAbort);
          resolve(p);
        },
        (err: unknown) => {
          signal.removeEventListener("abort", onAbort);
          reject(err);
        },
      );
    });
  }

  private async materializeOnce(key: string, expectedSha256: string, signal?: AbortSignal): Promise<string> {
    const dest = path.join(this.localDir, key);
    if (await this.cache.holds(key, expectedSha256)) return dest;
    const local = await stat(dest).catch(() => null);
    if (local && (await sha256File(dest, signal ? { signal } : {})) === expectedSha256) {
      await this.cache.mark(key, expectedSha256);
      return dest;
    }
    // Absent or stale locally: the bucket has the durable copy.
    await this.cache.forget(key);
    const Key = this.objectKey(key);
    const { client } = await this.sdk();
    await withRetries(
      async () => {
        const { tmp, digests } = await downloadToTemp(client, { Bucket: this.bucket, Key, key }, this.localDir, { signal });
        if (digests.sha256 !== expectedSha256) {
          await rm(tmp, { force: true });
          throw new BlobCorruptError(key, expectedSha256, digests.sha256);
        }
        await renameKeepingGrants(tmp, dest);
      },
      { attempts: this.attempts, signal },
    );
    await syncDir(this.localDir);
    await this.cache.mark(key, expectedSha256);
    return dest;
  }

  async delete(key: string): Promise<void> {
    const Key = this.objectKey(key);
    const { client, s3 } = await this.sdk();
    await withRetries(() => client.send(new s3.DeleteObjectCommand({ Bucket: this.bucket, Key })), {
      attempts: this.attempts,
    });
    await this.cache.forget(key);
    await rm(path.join(this.localDir, key), { force: true });
  }

  async stat(key: string): Promise<{ size: number } | null> {
    const head = await withRetries(() => this.head(key), { attempts: this.attempts });
    return head ? { size: head.ContentLength ?? 0 } : null;
  }

  async list(): Promise<string[]> {
    const { client, s3 } = await this.sdk();
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await withRetries(
        () =>
          client.send(
            new s3.ListObjectsV2Command({
              Bucket: this.bucket,
              Prefix: this.prefix,
              ...(token ? { ContinuationToken: token } : {}),
            }),
          ),
        { attempts: this.attempts },
      );
      for (const o of page.Contents ?? []) {
        const k = o.Key?.slice(this.prefix.length);
        // Only this store's flat keys: deeper "folders" under the prefix belong to someone else.
        if (k && /^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$/.test(k)) keys.push(k);
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return keys;
  }

  /** Closes the client's connections. */
  close(): void {
    this.closed = true;
    this.client?.destroy();
  }
}

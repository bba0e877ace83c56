import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { open, rename, rm, stat } from "node:fs/promises";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { FileList, FileStat, UploadResult } from "@sandtree/protocol";
import { InvalidResponseError } from "./errors.js";
import type { HttpClient, RequestOptions } from "./http.js";
import { sandboxPath } from "./sandboxes.js";

export interface TransferOptions extends RequestOptions {
  /** Called as bytes move; `total` is known for uploads and when the server sends Content-Length. */
  onProgress?: (bytes: number, total: number | undefined) => void;
}

export interface UploadOptions extends TransferOptions {
  /** File mode in the sandbox, e.g. "755" or 0o755. */
  mode?: string | number;
}

export interface ReadOptions extends RequestOptions {
  offset?: number;
  length?: number;
}

export interface WriteOptions extends RequestOptions {
  mode?: string | number;
}

export interface MkdirOptions extends RequestOptions {
  /** Create missing parents (default true). */
  parents?: boolean;
  mode?: number;
}

export interface RemoveOptions extends RequestOptions {
  recursive?: boolean;
}

/**
 * A sandbox's files (`client.files`, by sandbox id) or a volume's (`client.volumes.files`, by
 * volume id or name): the same calls on either, the first argument naming the owner.
 */
export class Files {
  constructor(
    private readonly http: HttpClient,
    private readonly filesPath: (id: string) => string = sandboxFilesPath,
  ) {}

  /** Streams a local file into the sandbox (any size; parents are created). */
  async upload(id: string, localPath: string, remotePath: string, options: UploadOptions = {}): Promise<UploadResult> {
    const { onProgress, mode, ...request } = options;
    const file = await open(localPath, "r");
    let source: ReturnType<typeof file.createReadStream>;
    let body: ReadableStream<Uint8Array>;
    let total: number;
    try {
      const st = await file.stat();
      if (!st.isFile()) throw Object.assign(new Error(`${localPath} is not a regular file`), { code: "EISDIR" });
      total = st.size;
      source = file.createReadStream();
      body = Readable.toWeb(source) as unknown as ReadableStream<Uint8Array>;
    } catch (err) {
      await file.close();
      throw err;
    }
    let sent = 0;
    const counted = body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          sent += chunk.length;
          onProgress?.(sent, total);
          controller.enqueue(chunk);
        },
      }),
    );
    // The answer comes after the whole body: no deadline unless one is asked for.
    try {
      return await this.http.json(UploadResult, {
        timeoutMs: 0,
        ...request,
        method: "PUT",
        path: this.filesPath(id),
        query: { path: remotePath, mode: modeString(mode) },
        body: counted,
      });
    } finally {
      // An answer before the whole body was read (a refusal, a dropped connection) leaves the
      // stream unfinished: close the file now rather than when the handle is collected.
      if (!source.closed) source.destroy();
    }
  }

  /** Streams a file out of the sandbox to `localPath` (written whole or not at all). */
  async download(id: string, remotePath: string, localPath: string, options: TransferOptions = {}): Promise<{ bytes: number }> {
    const { onProgress, ...request } = options;
    // Renaming the finished file over a directory would fail late, with EBUSY or EISDIR.
    if ((await stat(localPath).catch(() => null))?.isDirectory()) {
      throw Object.assign(new Error(`${localPath} is a directory: name the file to write`), { code: "EISDIR" });
    }
    const { response, mapError } = await this.http.open({
      ...request,
      timeoutScope: "headers",
      method: "GET",
      path: this.filesPath(id),
      query: { path: remotePath },
      accept: "application/octet-stream",
    });
    if (!response.body) throw new InvalidResponseError("the download answer had no body");
    const length = Number(response.headers.get("content-length"));
    const total = Number.isFinite(length) && length >= 0 && response.headers.has("content-length") ? length : undefined;
    let bytes = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        bytes += chunk.length;
        onProgress?.(bytes, total);
        done(null, chunk);
      },
    });
    const partial = `${localPath}.${randomBytes(4).toString("hex")}.partial`;
    try {
      const source = Readable.fromWeb(response.body as unknown as import("node:stream/web").ReadableStream<Uint8Array>);
      await pipeline(source, counter, createWriteStream(partial, { flags: "wx" }));
      await rename(partial, localPath);
    } catch (err) {
      await rm(partial, { force: true });
      // Local file-system errors (ENOSPC, EACCES) stay as they are; the rest is the connection.
      throw isLocalFsError(err) ? err : mapError(err);
    }
    return { bytes };
  }

  /** Reads a file (or a byte range of it): bytes, or text when `encoding` is given. */
  read(id: string, path: string, options: ReadOptions & { encoding: "utf8" | "utf-8" }): Promise<string>;
  read(id: string, path: string, options?: ReadOptions & { encoding?: undefined }): Promise<Uint8Array>;
  async read(
    id: string,
    path: string,
    options: ReadOptions & { encoding?: "utf8" | "utf-8" | undefined } = {},
  ): Promise<string | Uint8Array> {
    const { offset, length, encoding, ...request } = options;
    const { body: bytes } = await this.http.bytes({
      ...request,
      method: "GET",
      path: this.filesPath(id),
      query: { path, offset, length },
      accept: "application/octet-stream",
    });
    return encoding ? new TextDecoder().decode(bytes) : bytes;
  }

  /** Writes a whole file (parents are created). Strings are written as UTF-8. */
  write(id: string, path: string, data: string | Uint8Array, options: WriteOptions = {}): Promise<UploadResult> {
    const { mode, ...request } = options;
    return this.http.json(UploadResult, {
      ...request,
      method: "PUT",
      path: this.filesPath(id),
      query: { path, mode: modeString(mode) },
      body: data,
    });
  }

  stat(id: string, path: string, options: RequestOptions = {}): Promise<FileStat> {
    return this.http.json(FileStat, { ...options, method: "GET", path: `${this.filesPath(id)}/stat`, query: { path } });
  }

  list(id: string, path: string, options: RequestOptions = {}): Promise<FileList> {
    return this.http.json(FileList, { ...options, method: "GET", path: `${this.filesPath(id)}/list`, query: { path } });
  }

  mkdir(id: string, path: string, options: MkdirOptions = {}): Promise<FileStat> {
    const { parents, mode, ...request } = options;
    return this.http.json(FileStat, {
      ...request,
      method: "POST",
      path: `${this.filesPath(id)}/mkdir`,
      json: { path, ...(parents !== undefined ? { parents } : {}), ...(mode !== undefined ? { mode } : {}) },
    });
  }

  remove(id: string, path: string, options: RemoveOptions = {}): Promise<void> {
    const { recursive, ...request } = options;
    return this.http.empty({
      ...request,
      method: "DELETE",
      path: this.filesPath(id),
      query: { path, recursive: recursive ? "true" : undefined },
    });
  }
}

function sandboxFilesPath(id: string): string {
  return `${sandboxPath(id)}/files`;
}

function modeString(mode: string | number | undefined): string | undefined {
  return typeof mode === "number" ? mode.toString(8) : mode;
}

function isLocalFsError(err: unknown): boolean {
  return err instanceof Error && typeof (err as NodeJS.ErrnoException).path === "string";
}

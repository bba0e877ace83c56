import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, readdir, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { type PackedVolume, SandtreeError } from "@sandtree/protocol";
import type { BlobStore } from "../blobs/blob-store.js";
import { isMounted } from "./volume-image.js";

const execFileP = promisify(execFile);

async function sha256Of(file: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest("hex");
}

async function tar(args: string[], what: string): Promise<void> {
  try {
    await execFileP("tar", args, { maxBuffer: 1 << 20 });
  } catch (err) {
    const text = `${(err as { stderr?: string }).stderr ?? ""} ${(err as Error).message}`.trim().split("\n")[0] ?? "";
    const full = /No space left|Disk quota exceeded/.test(text);
    throw new SandtreeError(full ? "HOST_DISK_FULL" : "INTERNAL", `could not ${what} the volume: ${text}`);
  }
}

/**
 * A volume's directory as one tar archive in the blob store (the fleet's object store when it has
 * one), for its move to another host: owners and modes as numbers, hard links, symlinks and
 * sparse files kept. Packing again gives a new archive under the key given (a move uses a key of
 * its own), so a move resumed after a crash packs again rather than trusting a half-written one.
 */
export async function packVolume(blobs: BlobStore, dir: string, key: string, signal?: AbortSignal): Promise<PackedVolume> {
  const file = path.join(blobs.localDir, `${key}.packing`);
  await rm(file, { force: true });
  try {
    await tar(["--create", "--file", file, "--numeric-owner", "--sparse", "--directory", dir, "."], "pack");
    const meta = { sha256: await sha256Of(file), size: (await stat(file)).size };
    await blobs.put(key, file, meta, signal ? { signal } : {});
    return { key, ...meta };
  } finally {
    await rm(file, { force: true });
  }
}

/**
 * The archive `key` (its sha256 checked) unpacked as the directory `dir`, replacing what was there
 * (a copy left by an earlier stay of the volume on this host, or an unpack a crash cut short): it
 * is unpacked beside `dir` and renamed over it, so `dir` is whole or absent, never half. A `dir`
 * that is its image's mount point cannot be renamed over: it is emptied and unpacked in place (a
 * move cut short unpacks again; a create that fails deletes the volume).
 */
export async function unpackVolume(blobs: BlobStore, packed: PackedVolume, dir: string, signal?: AbortSignal): Promise<void> {
  const file = await blobs.materialize(packed.key, packed.sha256, signal ? { signal } : {});
  if (await isMounted(dir)) {
    for (const name of await readdir(dir)) await rm(path.join(dir, name), { recursive: true, force: true });
    const args = ["--extract", "--file", file, "--numeric-owner", "--same-permissions", "--same-owner", "--directory", dir];
    return tar(args, "unpack");
  }
  const incoming = `${dir}.incoming`;
  await rm(incoming, { recursive: true, force: true });
  await mkdir(incoming, { recursive: true, mode: 0o755 });
  try {
    await tar(
      ["--extract", "--file", file, "--numeric-owner", "--same-permissions", "--same-owner", "--directory", incoming],
      "unpack",
    );
    const old = `${dir}.old`;
    await rm(old, { recursive: true, force: true });
    await rename(dir, old).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "ENOENT") throw err;
    });
    await rename(incoming, dir);
    await rm(old, { recursive: true, force: true });
  } finally {
    await rm(incoming, { recursive: true, force: true });
  }
}

import { createReadStream, createWriteStream } from "node:fs";
import { chmod, chown, lstat, open, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { SandtreeError } from "@sandtree/protocol";
import { runCommand, throwIfAborted } from "../util/run-command.js";
import { listTarEntries, type TarEntry } from "./tar-entries.js";

export interface ApplyLayerOptions {
  /** Scratch directory for the decompressed tar (same disk as the rootfs is best). */
  workDir: string;
  signal?: AbortSignal | undefined;
}

const WHITEOUT = ".wh.";
const OPAQUE = ".wh..wh..opq";

type Compression = "gzip" | "zstd" | "none";

async function detectCompression(path: string): Promise<Compression> {
  const fh = await open(path, "r");
  try {
    const head = Buffer.alloc(4);
    await fh.read(head, 0, 4, 0);
    if (head[0] === 0x1f && head[1] === 0x8b) return "gzip";
    if (head.readUInt32LE(0) === 0xfd2fb528) return "zstd";
    return "none";
  } finally {
    await fh.close();
  }
}

/** Splits a member name into components relative to the rootfs; `..` anywhere is refused. */
export function memberPath(name: string, layer: string): string[] {
  const parts = name.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) {
    throw new SandtreeError("IMAGE_INVALID", `layer ${layer} has a member escaping the rootfs: ${name}`, {
      member: name,
    });
  }
  return parts;
}

type Existing = "missing" | "directory" | "other";

/** lstat of rootfs/parts without ever following a symlink on the way. */
async function lstatInside(rootfs: string, parts: string[]): Promise<Existing> {
  let path = rootfs;
  for (let i = 0; i < parts.length; i++) {
    path = join(path, parts[i] ?? "");
    const st = await lstat(path).catch(() => undefined);
    if (!st) return "missing";
    if (i < parts.length - 1 && !st.isDirectory()) return "missing";
    if (i === parts.length - 1) return st.isDirectory() ? "directory" : "other";
  }
  return "directory";
}

async function removeInside(rootfs: string, parts: string[]): Promise<void> {
  if (parts.length === 0) return;
  if ((await lstatInside(rootfs, parts)) !== "missing") {
    await rm(join(rootfs, ...parts), { recursive: true, force: true });
  }
}

async function clearDirectory(rootfs: string, parts: string[]): Promise<void> {
  if ((await lstatInside(rootfs, parts)) !== "directory") return;
  const dir = join(rootfs, ...parts);
  for (const name of await readdir(dir)) await rm(join(dir, name), { recursive: true, force: true });
}

/**
 * Prepares the rootfs for one layer with overlayfs semantics: whiteouts delete from the lower
 * layers, and a lower entry of the wrong kind (a symlink where this layer has a directory, a
 * directory where it has a file) is removed so GNU tar never writes through a symlink.
 */
async function prepareLowerLayers(rootfs: string, entries: TarEntry[], layer: string): Promise<void> {
  const checked = new Set<string>();
  const regular: { parts: string[]; entry: TarEntry }[] = [];
  // Non-directories this layer itself creates: nothing may be written beneath them.
  const leaves = new Set<string>();
  const throughLeaf = (parts: string[]): boolean =>
    parts.slice(0, -1).some((_, i) => leaves.has(parts.slice(0, i + 1).join("/")));
  for (const entry of entries) {
    const parts = memberPath(entry.name, layer);
    const linkParts = entry.type === "hardlink" ? memberPath(entry.linkname, layer) : [];
    if (throughLeaf(parts) || throughLeaf(linkParts)) {
      throw new SandtreeError("IMAGE_INVALID", `layer ${layer} writes beneath a non-directory: ${entry.name}`, {
        member: entry.name,
      });
    }
    const key = parts.join("/");
    if (entry.type === "directory") leaves.delete(key);
    else leaves.add(key);
    const base = parts[parts.length - 1];
    if (base === OPAQUE) await clearDirectory(rootfs, parts.slice(0, -1));
    else if (base?.startsWith(WHITEOUT)) await removeInside(rootfs, [...parts.slice(0, -1), base.slice(WHITEOUT.length)]);
    else if (parts.length > 0) regular.push({ parts, entry });
  }
  for (const { parts, entry } of regular) {
    for (let i = 1; i < parts.length; i++) {
      const key = parts.slice(0, i).join("/");
      if (checked.has(key)) continue;
      checked.add(key);
      if ((await lstatInside(rootfs, parts.slice(0, i))) === "other") await rm(join(rootfs, key), { force: true });
    }
    const existing = await lstatInside(rootfs, parts);
    const wantsDir = entry.type === "directory";
    if ((wantsDir && existing === "other") || (!wantsDir && existing === "directory")) {
      await rm(join(rootfs, ...parts), { recursive: true, force: true });
    }
  }
  // A hard link whose target lies behind a symlink would link a host file into the image.
  for (const { entry } of regular) {
    if (entry.type !== "hardlink") continue;
    const target = memberPath(entry.linkname, layer);
    let path = rootfs;
    for (const part of target.slice(0, -1)) {
      path = join(path, part);
      const st = await lstat(path).catch(() => undefined);
      if (st && !st.isDirectory()) {
        throw new SandtreeError("IMAGE_INVALID", `layer ${layer} hard-links through a symlink: ${entry.linkname}`);
      }
    }
  }
}

/** Applies one layer blob (gzip, zstd or plain tar) on top of `rootfs`. */
export async function applyLayer(layerPath: string, rootfs: string, opts: ApplyLayerOptions): Promise<void> {
  const { signal } = opts;
  throwIfAborted(signal);
  const compression = await detectCompression(layerPath);
  let tarPath = layerPath;
  if (compression !== "none") tarPath = join(opts.workDir, `layer-${process.pid}-${Date.now()}.tar`);
  try {
    if (compression === "gzip") {
      await pipeline(createReadStream(layerPath), createGunzip(), createWriteStream(tarPath), signal ? { signal } : {}).catch(
        (e: unknown) => {
          if (signal?.aborted) throw e;
          throw new SandtreeError("IMAGE_INVALID", `layer ${layerPath} is not valid gzip: ${(e as Error).message}`);
        },
      );
    } else if (compression === "zstd") {
      await runCommand(["zstd", "-d", "-q", "-f", "-o", tarPath, layerPath], { signal, errorCode: "IMAGE_INVALID" });
    }
    const entries = await listTarEntries(tarPath);
    await prepareLowerLayers(rootfs, entries, layerPath);
    await runCommand(
      [
        "tar",
        "--extract",
        "--file",
        tarPath,
        "--directory",
        rootfs,
        "--numeric-owner",
        "--same-owner",
        "--same-permissions",
        "--xattrs",
        "--xattrs-include=*",
        "--exclude=.wh.*",
        "--warning=no-timestamp",
      ],
      { signal, errorCode: "IMAGE_INVALID" },
    );
  } finally {
    if (tarPath !== layerPath) await rm(tarPath, { force: true });
  }
}

/** Applies layers bottom to top, then gives the root directory the usual owner and mode. */
export async function applyLayers(layerPaths: readonly string[], rootfs: string, opts: ApplyLayerOptions): Promise<void> {
  for (const layer of layerPaths) await applyLayer(layer, rootfs, opts);
  await chown(rootfs, 0, 0);
  await chmod(rootfs, 0o755);
}

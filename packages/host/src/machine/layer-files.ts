import { mkdirSync } from "node:fs";
import { access, readdir, rename, rm } from "node:fs/promises";
import path from "node:path";
import { SandtreeError } from "@sandtree/protocol";
import { BLOB_KEY_MAX } from "../blobs/blob-store.js";
import { ensureBaseLink } from "../disks/overlay.js";
import { isFlatName } from "../util/flat-names.js";
import { checkBaseName } from "./host-disks.js";
import { checkLayerName, layerFile } from "./host-layers.js";

/**
 * A flattening's temporary layer as it was named before names were checked (hidden): listed under
 * its flat name, renamed to it first, so a restart finishes or removes it like any other.
 */
const HIDDEN_BEFORE_CHECKS = /^\.(tmp-flat-[A-Za-z0-9._-]+)$/;

/**
 * Links the image base named `base`, whose file on this host is `file`, into the layers directory
 * `dir` (ensureBaseLink) and returns the link's name; IMAGE_NOT_FOUND, nothing linked, when no
 * base lies there (an image this host never had, or removed), so a link in use is never pointed elsewhere.
 */
export async function linkBaseIn(dir: string, base: string, file: string): Promise<string> {
  try {
    await access(file);
  } catch {
    throw new SandtreeError("IMAGE_NOT_FOUND", `the image base ${base} is not on this host`, { base });
  }
  mkdirSync(dir, { recursive: true });
  return ensureBaseLink(dir, file);
}

/** Whether `name` lies in the layers directory `dir` (a link to an image base that is gone: false). */
export async function hasLayerFile(dir: string, name: string): Promise<boolean> {
  const file = layerFile(dir, name, "name");
  try {
    await access(file);
    return true;
  } catch {
    return false;
  }
}

/** Removes `name` from the layers directory `dir`; done when it is gone already. */
export async function removeLayerFile(dir: string, name: string): Promise<void> {
  await rm(layerFile(dir, name, "name"), { force: true });
}

/** The names in the layers directory `dir` that begin with `prefix` ("" : all of them); none when it does not exist. */
export async function listLayerFiles(dir: string, prefix: string): Promise<string[]> {
  if (prefix !== "") checkLayerName(prefix, "prefix");
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const names = new Set<string>();
  for (const f of entries) {
    const hidden = HIDDEN_BEFORE_CHECKS.exec(f)?.[1];
    if (hidden && !entries.includes(hidden)) {
      await rename(path.join(dir, f), path.join(dir, hidden));
      names.add(hidden);
    } else names.add(f);
  }
  return [...names].filter((n) => n.startsWith(prefix) && isFlatName(n, BLOB_KEY_MAX)).sort();
}

/**
 * What every host with a layers directory on its own disk answers alike (QEMU's, the fake's):
 * base links, and which disks, layers and memory states lie there, by name.
 */
export abstract class LayerDirectory {
  abstract readonly layersDir: string;

  /** The file of the disk, layer or memory state `name` (VALIDATION_FAILED on `field` when it is not a name). */
  file(name: string, field: string): string {
    return layerFile(this.layersDir, name, field);
  }

  /** Where the image base named `base` (checked: checkBaseName) lies on this host, if it does (its image store's file). */
  protected abstract baseFile(base: string): string;

  async linkBase(base: string): Promise<string> {
    return linkBaseIn(this.layersDir, base, this.baseFile(checkBaseName(base)));
  }

  hasLayer(name: string): Promise<boolean> {
    return hasLayerFile(this.layersDir, name);
  }

  removeLayer(name: string): Promise<void> {
    return removeLayerFile(this.layersDir, name);
  }

  listLayers(prefix: string): Promise<string[]> {
    return listLayerFiles(this.layersDir, prefix);
  }
}

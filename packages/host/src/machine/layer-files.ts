import { mkdirSync } from "node:fs";
import { access, readdir, rename, rm } from "node:fs/promises";
import path from "node:path";
import { SandtreeError } from "@sandtree/protocol";
import { ensureBaseLink } from "../disks/overlay.js";
import { checkLayerName, layerFile } from "./host-layers.js";

/**
 * A flattening's temporary layer as it was named before names were checked (hidden): listed under
 * its flat name, renamed to it first, so a restart finishes or removes it like any other.
 */
const HIDDEN_BEFORE_CHECKS = /^\.(tmp-flat-[A-Za-z0-9._-]+)$/;

/**
 * Links the image base `basePath` into the layers directory `dir` (ensureBaseLink) and returns the
 * link's name; IMAGE_NOT_FOUND, nothing linked, when no base lies there (another host's path, or
 * an image removed), so a link in use is never pointed elsewhere.
 */
export async function linkBaseIn(dir: string, basePath: string): Promise<string> {
  try {
    await access(basePath);
  } catch {
    throw new SandtreeError("IMAGE_NOT_FOUND", `no image base lies at ${JSON.stringify(basePath.slice(0, 240))} on this host`, {
      base_path: basePath.slice(0, 240),
    });
  }
  mkdirSync(dir, { recursive: true });
  return ensureBaseLink(dir, basePath);
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
  return [...names].filter((n) => n.startsWith(prefix) && isLayerName(n)).sort();
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

  linkBase(basePath: string): Promise<string> {
    return linkBaseIn(this.layersDir, basePath);
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

function isLayerName(name: string): boolean {
  try {
    checkLayerName(name);
    return true;
  } catch {
    return false;
  }
}

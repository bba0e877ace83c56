import path from "node:path";
import { checkFlatName } from "../util/flat-names.js";
import type { VolumeMount } from "./guest-mount.js";

/** The longest volume name a host takes (the control plane's are `vol-` and 16 hex digits). */
export const VOLUME_NAME_MAX = 64;

/**
 * `name` when it can name a volume in a host's volumes directory (a flat name, checkFlatName);
 * else VALIDATION_FAILED on `field`. A host checks every mount's name before it touches a file or
 * starts a machine, so a mount never reaches outside its volumes directory.
 */
export function checkVolumeName(name: string, field = "volume"): string {
  return checkFlatName(name, { max: VOLUME_NAME_MAX, field, what: "a volume's name" });
}

/** Every mount's volume name checked (checkVolumeName), before anything else of a start or adoption. */
export function checkMounts(mounts: readonly VolumeMount[] | undefined): void {
  for (const m of mounts ?? []) checkVolumeName(m.volume, "mounts.volume");
}

/**
 * The directory guests mount of the volume `name` in the volumes directory `root`:
 * `<root>/<name>/data`, its image (VolumeImages), when it has one, beside it in `<root>/<name>`.
 */
export function volumeDataDir(root: string, name: string): string {
  return path.join(root, checkVolumeName(name), "data");
}

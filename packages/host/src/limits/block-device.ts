import { existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import path from "node:path";

/**
 * The whole block device ("MAJOR:MINOR") holding `dir`, as blkio.throttle and io.max want it
 * (they refuse a partition), or null where the filesystem has no block device of its own
 * (tmpfs, overlayfs, a network filesystem): I/O rates are then not enforced by the cgroup.
 */
export function blockDeviceOf(dir: string, sysfs = "/sys"): string | null {
  const dev = statSync(dir, { bigint: true }).dev;
  const major = Number(((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn));
  const minor = Number((dev & 0xffn) | ((dev >> 12n) & ~0xffn));
  if (major === 0) return null;
  const node = path.join(sysfs, "dev/block", `${major}:${minor}`);
  if (!existsSync(node)) return null;
  try {
    const real = realpathSync(node);
    // A partition's sysfs directory sits inside its disk's, whose `dev` names the disk.
    if (existsSync(path.join(real, "partition"))) return readFileSync(path.join(real, "..", "dev"), "utf8").trim();
    return `${major}:${minor}`;
  } catch {
    return null;
  }
}

import { existsSync, readdirSync, readFileSync, statfsSync, statSync } from "node:fs";
import path from "node:path";

/** statfs f_type of tmpfs. */
const TMPFS_MAGIC = 0x01021994;
const SHM = "/dev/shm";

/**
 * The tmpfs directory where this server may keep memory checkpoints' RAM files
 * (`/dev/shm/<name>`, one per data dir: `name` is the run root's), or null when `/dev/shm` is not a
 * tmpfs. A RAM file there costs host memory, not disk: building it writes no page to a disk and
 * fills no sparse file's blocks (the memory-fork-profile bench's build went from 0.4-2.6 s on ext4
 * to 0.3-0.4 s).
 */
export function ramDirFor(runRoot: string): string | null {
  try {
    if (statfsSync(SHM).type !== TMPFS_MAGIC) return null;
  } catch {
    return null;
  }
  return path.join(SHM, path.basename(runRoot));
}

function meminfoBytes(field: string): number | null {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync("/proc/meminfo", "utf8"));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** Bytes the `.ram` files in `dir` hold now (tmpfs pages are all resident). */
function heldBytes(dir: string): number {
  if (!existsSync(dir)) return 0;
  let sum = 0;
  for (const f of readdirSync(dir)) {
    if (!f.endsWith(".ram")) continue;
    try {
      sum += statSync(path.join(dir, f)).blocks * 512;
    } catch {}
  }
  return sum;
}

/**
 * Whether one more RAM file of `bytes` fits in the tmpfs `dir`: the files there (this one
 * included) stay within an eighth of the host's memory, at least a quarter of it stays available
 * afterwards, and the tmpfs has room. A RAM image on tmpfs holds the guest's whole memory size:
 * loading the state reads every page, and a read of a hole in a shared tmpfs mapping allocates.
 */
export function fitsInRam(dir: string, bytes: number): boolean {
  const total = meminfoBytes("MemTotal");
  const available = meminfoBytes("MemAvailable");
  if (total === null || available === null) return false;
  if (heldBytes(dir) + bytes > total / 8) return false;
  if (available - bytes < total / 4) return false;
  try {
    const fs = statfsSync(path.dirname(dir));
    return fs.bavail * fs.bsize > bytes * 2;
  } catch {
    return false;
  }
}

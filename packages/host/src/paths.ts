import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";

/** Where setup puts the kernel, guest agent, initramfs and images (outside any clone). */
export function cacheDir(): string {
  return process.env.SANDTREE_CACHE_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), ".cache"), "sandtree");
}

/** The server's default data directory (database, sandboxes, credentials). */
export function defaultDataDir(): string {
  return (
    process.env.SANDTREE_DATA_DIR ?? path.join(process.env.XDG_DATA_HOME ?? path.join(homedir(), ".local", "share"), "sandtree")
  );
}

export interface GuestArtifacts {
  kernel: string;
  initramfs: string;
  kernelRelease: string;
}

/** Locates the kernel and initramfs built by `sandtree setup`; throws a clear error if missing. */
export function guestArtifacts(dir = cacheDir()): GuestArtifacts {
  const kernel = path.join(dir, "kernel", "vmlinuz");
  const initramfs = path.join(dir, "guest", "initramfs.cpio.gz");
  const releaseFile = path.join(dir, "kernel", "release");
  for (const f of [kernel, initramfs, releaseFile]) {
    if (!existsSync(f)) throw new Error(`${f} is missing: run \`sandtree setup\` (or npm run setup) first`);
  }
  return { kernel, initramfs, kernelRelease: readFileSync(releaseFile, "utf8").trim() };
}

/**
 * The read-only modules disk build-guest.sh writes beside the initramfs (every module of the
 * kernel), or null for a guest built without one: every VM of that initramfs gets it.
 */
export function modulesDiskFor(initramfs: string): string | null {
  const file = path.join(path.dirname(initramfs), "modules.img");
  return existsSync(file) ? file : null;
}

/** The jail's launcher build-jailer.sh writes (static, so a nested bundle carries it as it is). */
export function jailerBinary(dir = cacheDir()): string {
  return path.join(dir, "jail", "sandtree-jail");
}

/** The library build-jailer.sh writes beside the launcher, preloaded into clones' QEMUs (vmm/free-page-reporting.ts). */
export function privateRamShimFile(dir = cacheDir()): string {
  return path.join(dir, "jail", "private-ram-discard.so");
}

import { existsSync, statSync } from "node:fs";
import { privateRamShimFile } from "../paths.js";

/**
 * Free page reporting: every VM gets `virtio-balloon-device,free-page-reporting=on` and the guest
 * loads virtio_balloon (build-guest.sh), so memory the guest frees (in 2 MiB blocks, ~2 s after)
 * goes back to the host: QEMU discards those pages of its RAM.
 *
 * A copy-on-write clone maps its template's RAM file privately (`share=off`). QEMU 7.2 discards
 * RAM with a hole punched in the RAM block's file before its madvise(MADV_DONTNEED): on a clone
 * that hole is punched in the template's file, which every other clone reads (zeros where data
 * was: bench/free-page-reporting.py). QEMU 8.2 skips the hole punch for private mappings. Here a
 * clone's QEMU is started with private-ram-discard.so preloaded (packages/host/jail/, built by
 * build-jailer.sh) and its RAM file named by dev:ino, so the punch is skipped and the madvise
 * alone drops the clone's private copies. Without that library no VM gets the device (a clone
 * must never discard through the shared file): the host says so once. SANDTREE_FREE_PAGE_REPORTING=off
 * turns it off on a host that has the library (A/B measurements: bench/density.mjs).
 *
 * The device is part of every saved state (templates, memory images, checkpoints): template and
 * memory-image keys include `freePageReporting()`.
 */
let cached: string | null | undefined;

/** The preload library when it is built and not turned off (free page reporting on), else null (warned once). */
export function privateRamShim(): string | null {
  if (process.env.SANDTREE_FREE_PAGE_REPORTING === "off") return null;
  if (cached !== undefined) return cached;
  const file = privateRamShimFile();
  cached = existsSync(file) ? file : null;
  if (!cached) {
    process.emitWarning(`${file} is missing (run setup again): free page reporting is off (guests keep the memory they free)`, {
      code: "SANDTREE_FREE_PAGE_REPORTING_OFF",
    });
  }
  return cached;
}

/** Whether this host's VMs get free page reporting (part of the device model of saved states). */
export function freePageReporting(): boolean {
  return privateRamShim() !== null;
}

/**
 * The environment a QEMU with free page reporting is started with: for a clone (a private mapping
 * of `memoryFile`), the preload library and the file's identity; nothing otherwise.
 */
export function privateRamEnv(memoryFile: { path: string; share: boolean } | undefined): Record<string, string> {
  const shim = privateRamShim();
  if (!shim || !memoryFile || memoryFile.share) return {};
  const st = statSync(memoryFile.path, { bigint: true });
  return { LD_PRELOAD: shim, SANDTREE_PRIVATE_RAM: `${st.dev}:${st.ino}` };
}

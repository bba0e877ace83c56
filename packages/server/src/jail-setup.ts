import { chmodSync, lstatSync, mkdirSync, readdirSync } from "node:fs";
import path from "node:path";
import { configureJail } from "@sandtree/host";
import type { ServerConfigValues } from "./config.js";

/**
 * Configures the jail every QEMU of this process starts in (docs/security.md). Returns why it is
 * off (the caller logs it loudly), or null when it is on.
 */
export function configureServerJail(cfg: ServerConfigValues): string | null {
  const root = typeof process.getuid === "function" && process.getuid() === 0;
  const why =
    cfg.jail === "off"
      ? "SANDTREE_JAIL=off"
      : root
        ? null
        : "the server does not run as root, so it cannot give QEMU its own uid";
  configureJail({ enabled: why === null, uidBase: cfg.jailUidBase, uidCount: cfg.jailUidCount });
  return why;
}

/**
 * A jailed QEMU is let through the data directory to its own files (jail.ts grants it the
 * directories on the way): nothing at the data directory's top (the database, the server's key,
 * credentials, other sandboxes' directories) stays open to other users, so a VM's uid passing
 * through reaches nothing else.
 */
export function closeDataDir(dataDir: string): void {
  // Made now (closed), not later by whoever writes there first with the default mode.
  for (const dir of ["layers", "sandboxes", "templates", "memory-images"])
    mkdirSync(path.join(dataDir, dir), { recursive: true, mode: 0o700 });
  for (const name of readdirSync(dataDir)) {
    const p = path.join(dataDir, name);
    try {
      const st = lstatSync(p);
      if (st.isSymbolicLink()) continue;
      // Others keep only the right to cross a directory (jail.ts grants it on the way to a VM's files).
      if (st.mode & 0o006) chmodSync(p, st.mode & 0o7771);
    } catch {}
  }
}

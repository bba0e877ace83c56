import { chmodSync, lstatSync, mkdirSync, readdirSync } from "node:fs";
import path from "node:path";

/**
 * A jailed VMM is let through the data directory to its own files (the host grants it the
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
      // Others keep only the right to cross a directory (the host grants it on the way to a VM's files).
      if (st.mode & 0o006) chmodSync(p, st.mode & 0o7771);
    } catch {}
  }
}

import { chownSync, type Stats, statSync } from "node:fs";
import { rename } from "node:fs/promises";
import { editMetadata } from "../util/own-metadata-edits.js";
import { runCommand } from "../util/run-command.js";

// The jail's ACL edits (jail.ts grants files to a VM's uid by named-user ACL entries).

let aclQueue: Promise<unknown> = Promise.resolve();

/**
 * setfacl reads a file's ACL, edits it and writes it back: two at once on one file (16 clones
 * of one template starting together) lose an entry. This process's ACL edits, and its renames
 * over granted files (renameKeepingGrants), run one at a time.
 */
function aclSerialized<T>(fn: () => Promise<T>): Promise<T> {
  const run = aclQueue.then(fn);
  aclQueue = run.catch(() => {});
  return run;
}

/**
 * setfacl with `args` ending in `-- FILE...` (or `files` named): its ctime changes recorded as
 * this process's own (own-metadata-edits.ts).
 */
export function setfacl(args: string[], files = args.slice(args.indexOf("--") + 1)): Promise<unknown> {
  return aclSerialized(() => editMetadata(files, () => runCommand(["setfacl", ...args])));
}

/**
 * Renames `from` over `to` (a layer a flattening or a download replaces) with `to`'s owner and
 * ACL first copied onto `from`. A grant is an ACL entry on an inode, recorded by path: a rename
 * after a VM's grant and before its QEMU opened the path handed QEMU a new inode without its
 * entry (EACCES on a backing file). Serialized with every grant: an entry made before the rename
 * is copied, one made after lands on the new inode.
 */
export function renameKeepingGrants(from: string, to: string): Promise<void> {
  // Only root grants (any host of this process may be jailed): a plain rename otherwise.
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return rename(from, to);
  return aclSerialized(async () => {
    let st: Stats;
    try {
      st = statSync(to);
    } catch {
      return rename(from, to);
    }
    const { stdout } = await runCommand(["getfacl", "--absolute-names", "--omit-header", "--", to]);
    chownSync(from, st.uid, st.gid);
    await runCommand(["setfacl", "--set-file=-", "--", from], { input: stdout });
    await rename(from, to);
  });
}

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

interface PendingGrant {
  args: string[];
  files: string[];
  done: (err: unknown) => void;
}
let pendingGrants: PendingGrant[] = [];

/**
 * Grants in `-m SPEC FILE... [-m SPEC FILE...]` form (absolute paths, no `--`), in the ACL queue.
 * Grants that wait there together run as one setfacl (its `-m` groups one after another: one
 * process, one read and write of each file's ACL per group): the children of one memory fork
 * granted on one RAM file and chain no longer start one setfacl after another. Should that one
 * fail (a file gone), each grant runs again alone, so only the one naming the missing file fails.
 */
export function grantAcl(args: string[], files: string[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    pendingGrants.push({ args, files, done: (err) => (err ? reject(err) : resolve()) });
    if (pendingGrants.length > 1) return;
    void aclSerialized(async () => {
      const batch = pendingGrants;
      pendingGrants = [];
      // setfacl's exit status is that of the last file it edited: a file before it that failed
      // shows only on stderr.
      const run = (gs: PendingGrant[]) =>
        editMetadata(
          gs.flatMap((g) => g.files),
          async () => {
            const { stderr } = await runCommand(["setfacl", ...gs.flatMap((g) => g.args)]);
            if (stderr.trim()) throw new Error(`setfacl: ${stderr.trim()}`);
          },
        );
      try {
        await run(batch);
        for (const g of batch) g.done(null);
      } catch (err) {
        if (batch.length === 1) return (batch[0] as PendingGrant).done(err);
        for (const g of batch) await run([g]).then(() => g.done(null), g.done);
      }
    });
  });
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

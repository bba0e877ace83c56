import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { JailLease, jailCommand, jailConfig, renameKeepingGrants } from "../src/qemu.js";

// A layer a VM was granted can be swapped for a new file (a flattening, a download) between the
// grant and the moment its QEMU opens it: the grant must hold for whatever file the path names.
// Needs root (the jail is off otherwise); no VM.

const dir = mkdtempSync(path.join(tmpdir(), "sandtree-jail-grants-"));
chmodSync(dir, 0o711);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Whether `uid`, jailed, can read `file`. */
const readableAs = (uid: number, file: string) =>
  spawnSync(...jailCommand(uid, ["/bin/sh", "-c", 'head -c 4 "$1" >/dev/null', "probe", file], { root: { rw: [], ro: [dir] } }))
    .status === 0;

describe.skipIf(!jailConfig().enabled)("grants and renamed files", () => {
  it("a file renamed over a granted one keeps every lease's grant, whichever comes first", async () => {
    const leases = await Promise.all([JailLease.acquire("grants-a"), JailLease.acquire("grants-b")]);
    const [a, b] = leases as [JailLease, JailLease];
    try {
      for (let i = 0; i < 8; i++) {
        const layer = path.join(dir, `layer-${i}.qcow2`);
        const flat = path.join(dir, `.tmp-flat-${i}`);
        writeFileSync(layer, "old layer", { mode: 0o600 });
        writeFileSync(flat, "flat layer", { mode: 0o600 });
        await a.allow([layer], "r");
        // b's grant and the swap start together: the grant lands before or after the rename.
        await Promise.all([i % 2 ? b.allow([layer], "r") : Promise.resolve(), renameKeepingGrants(flat, layer)]);
        if (i % 2 === 0) await b.allow([layer], "r");
        expect(readableAs(a.uid, layer), `a, round ${i}`).toBe(true);
        expect(readableAs(b.uid, layer), `b, round ${i}`).toBe(true);
      }
      // One lease's release leaves the other's grant in place.
      const layer = path.join(dir, "layer-0.qcow2");
      await a.release();
      expect(readableAs(a.uid, layer)).toBe(false);
      expect(readableAs(b.uid, layer)).toBe(true);
    } finally {
      for (const l of leases) await l?.release();
    }
  });
});

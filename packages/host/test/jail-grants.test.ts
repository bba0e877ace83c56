import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { defaultJailConfig, JailLease, jailCommand, renameKeepingGrants } from "../src/qemu.js";

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

const jail = defaultJailConfig();

describe.skipIf(!jail.enabled)("grants and renamed files", () => {
  it("a file renamed over a granted one keeps every lease's grant, whichever comes first", async () => {
    const leases = await Promise.all([JailLease.acquire(jail, "grants-a"), JailLease.acquire(jail, "grants-b")]);
    const [a, b] = leases as [JailLease, JailLease];
    try {
      for (let i = 0; i < 8; i++) {
        const layer = path.join(dir, `layer-${i}.qcow2`);
        const flat = path.join(dir, `.tmp-flat-${i}`);
        writeFileSync(layer, "old layer", { mode: 0o600 });
        writeFileSync(flat, "flat layer", { mode: 0o600 });
        await a.allow([{ files: [layer], perm: "r" }]);
        // b's grant and the swap start together: the grant lands before or after the rename.
        await Promise.all([
          i % 2 ? b.allow([{ files: [layer], perm: "r" }]) : Promise.resolve(),
          renameKeepingGrants(flat, layer),
        ]);
        if (i % 2 === 0) await b.allow([{ files: [layer], perm: "r" }]);
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

  it("grants waiting together land, each its own; one naming a gone file fails alone", async () => {
    // The children of one memory fork are granted on one RAM file at once: their grants share
    // one setfacl, and a failed share runs each alone.
    const leases = (await Promise.all([0, 1, 2, 3].map((i) => JailLease.acquire(jail, `grants-batch-${i}`)))) as JailLease[];
    const ram = path.join(dir, "batch-ram");
    const gone = path.join(dir, "batch-gone");
    writeFileSync(ram, "data", { mode: 0o600 });
    writeFileSync(gone, "data", { mode: 0o600 });
    const acl = () => spawnSync("getfacl", ["-c", "-n", ram], { encoding: "utf8" }).stdout;
    try {
      await Promise.all(leases.map((l) => l.allow([{ files: [ram], perm: "rw" }])));
      for (const l of leases) expect(acl()).toContain(`user:${l.uid}:rw-`);
      for (const l of leases) await l.release();
      const again = (await Promise.all([0, 1, 2].map((i) => JailLease.acquire(jail, `grants-batch2-${i}`)))) as JailLease[];
      leases.push(...again);
      const [a, b, c] = again as [JailLease, JailLease, JailLease];
      const granting = [a.allow([{ files: [ram], perm: "r" }]), b.allow([{ files: [gone], perm: "r" }])];
      // allow() has checked the file; it is gone by the time the shared setfacl runs.
      rmSync(gone);
      granting.push(c.allow([{ files: [ram], perm: "r" }]));
      const results = await Promise.allSettled(granting);
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
      expect(acl()).toContain(`user:${a.uid}:r--`);
      expect(acl()).toContain(`user:${c.uid}:r--`);
    } finally {
      for (const l of leases) await l.release();
    }
  });

  it("one grant of several groups gives each file its own access, and the release takes all back", async () => {
    const lease = (await JailLease.acquire(jail, "grants-groups")) as JailLease;
    const ram = path.join(dir, "ram");
    const layers = [path.join(dir, "top.qcow2"), path.join(dir, "base.qcow2")];
    for (const f of [ram, ...layers]) writeFileSync(f, "data", { mode: 0o600 });
    try {
      await lease.allow([
        { files: [ram], perm: "rw" },
        { files: layers, perm: "r" },
      ]);
      const acl = (f: string) => spawnSync("getfacl", ["-c", "-n", f], { encoding: "utf8" }).stdout;
      expect(acl(ram)).toContain(`user:${lease.uid}:rw-`);
      for (const f of layers) expect(acl(f)).toContain(`user:${lease.uid}:r--`);
      expect(readableAs(lease.uid, layers[1] as string)).toBe(true);
      await lease.release();
      for (const f of [ram, ...layers]) expect(acl(f)).not.toContain(`user:${lease.uid}:`);
    } finally {
      await lease.release();
    }
  });
});

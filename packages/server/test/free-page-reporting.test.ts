// Free page reporting (vmm/free-page-reporting.ts): a warm clone that fills and frees 150 MiB
// gives the memory back to the host (its QEMU's RSS drops), while the template's RAM file, which
// every clone maps copy-on-write, keeps every page (QEMU 7.2 would punch holes in it without the
// preloaded private-ram-discard.so) and a later clone of it still works. One server, two clones.
import { createHash } from "node:crypto";
import { createReadStream, existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { freePageReporting } from "@sandtree/host/qemu";
import { describe, expect, it } from "vitest";
import { qemuPidsFor, serverForFile } from "./helpers.js";

const t = serverForFile();

const SPEC = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
const run = async (id: string, command: string) => (await t.api("POST", `/v1/sandboxes/${id}/exec`, { command })).body;

/** The shape template's RAM file, once it is built (the first start boots cold, templates follow). */
async function templateRam(): Promise<string> {
  const root = path.join(t.dataDir, "templates");
  for (let i = 0; i < 480; i++) {
    for (const k of existsSync(root) ? readdirSync(root) : []) {
      const meta = path.join(root, k, "template.json");
      if (existsSync(meta) && JSON.parse(readFileSync(meta, "utf8")).rootWait === true) return path.join(root, k, "ram");
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error("no shape template was built");
}

async function fileState(file: string): Promise<{ sha256: string; blocks: number }> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return { sha256: h.digest("hex"), blocks: statSync(file).blocks };
}

/**
 * The same bytes, and no block fewer (a punched hole frees blocks). It may hold more, its bytes
 * the same: seen once, 4 KiB more on ext4 (the template's pages written back later, a sparse file's
 * extent tree growing).
 */
function expectUnchanged(now: { sha256: string; blocks: number }, before: { sha256: string; blocks: number }): void {
  expect(now.sha256).toBe(before.sha256);
  expect(now.blocks).toBeGreaterThanOrEqual(before.blocks);
}

const rssMib = (pid: number) => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;

function qemuPid(id: string): number {
  const lines = qemuPidsFor([id]);
  expect(lines).toHaveLength(1);
  return Number(lines[0]!.split(" ")[0]);
}

describe.skipIf(!freePageReporting())("free page reporting on a copy-on-write clone", () => {
  it("returns what the guest freed to the host and leaves the template's RAM file as it was", { timeout: 600_000 }, async () => {
    const first = await t.api("POST", "/v1/sandboxes", SPEC);
    await t.waitRunning(first.body.id);
    const ram = await templateRam();
    await t.api("DELETE", `/v1/sandboxes/${first.body.id}`);

    const b = await t.waitRunning((await t.api("POST", "/v1/sandboxes", SPEC)).body.id);
    expect(b.start_path).toBe("warm");
    expect((await run(b.id, "ls /sys/bus/virtio/drivers/virtio_balloon/")).stdout).toMatch(/virtio\d/);
    const before = await fileState(ram);
    const pid = qemuPid(b.id);
    // The clone's QEMU runs with the library that keeps hole punches out of the template's file.
    expect(readFileSync(`/proc/${pid}/maps`, "utf8")).toContain("private-ram-discard.so");

    const fill = await run(
      b.id,
      "mkdir -p /run/fpr && mount -t tmpfs -o size=200m fpr /run/fpr && dd if=/dev/zero of=/run/fpr/big bs=1M count=150 2>&1",
    );
    expect(fill.exit_code, fill.stdout + fill.stderr).toBe(0);
    const filled = rssMib(pid);
    expect((await run(b.id, "rm /run/fpr/big && umount /run/fpr")).exit_code).toBe(0);
    // The guest reports freed 2 MiB blocks ~2 s after they gather; generous under load.
    let after = filled;
    for (let i = 0; i < 120 && filled - after < 100; i++) {
      await new Promise((r) => setTimeout(r, 500));
      after = rssMib(pid);
    }
    expect(
      filled - after,
      `QEMU RSS ${filled.toFixed(0)} MiB filled, ${after.toFixed(0)} MiB after the free`,
    ).toBeGreaterThanOrEqual(100);

    // Free what the template itself held (its caches; compaction moves its pages out of 2 MiB
    // blocks, which are then free and reported): those pages of the file hold the template's data.
    expect(
      (await run(b.id, "sync; echo 3 > /proc/sys/vm/drop_caches; echo 1 > /proc/sys/vm/compact_memory; sleep 6")).exit_code,
    ).toBe(0);
    // No page of the template's file changed (a punched hole would read as zeros in every clone).
    expectUnchanged(await fileState(ram), before);
    // And a clone started now, from that file, works as its template left it.
    const c = await t.waitRunning((await t.api("POST", "/v1/sandboxes", SPEC)).body.id);
    expect(c.start_path).toBe("warm");
    const sum = await run(c.id, "md5sum /bin/busybox && echo ok");
    expect(sum.stdout).toContain("ok");
    expectUnchanged(await fileState(ram), before);
    await Promise.all([b.id, c.id].map((id) => t.api("DELETE", `/v1/sandboxes/${id}`)));
  });
});

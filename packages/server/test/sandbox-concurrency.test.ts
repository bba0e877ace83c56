import { existsSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { qemuPidsFor, serverForFile } from "./helpers.js";

const t = serverForFile();

describe("20 sandboxes at once", () => {
  it("all reach RUNNING, answer, and leave nothing behind once deleted", { timeout: 600_000 }, async () => {
    const created = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        t.api("POST", "/v1/sandboxes", {
          image: "sandtree/busybox",
          memory_gb: 0.25,
          disk_size_gb: 1,
          labels: { batch: "c20", n: String(i) },
        }),
      ),
    );
    for (const c of created) expect(c.status).toBe(201);
    const ids = created.map((c) => c.body.id as string);
    await Promise.all(ids.map((id) => t.waitRunning(id, 500_000)));
    const list = await t.api("GET", "/v1/sandboxes?label=batch=c20&status=RUNNING&limit=1000");
    expect(list.body.sandboxes).toHaveLength(20);
    const outs = await Promise.all(ids.map((id) => t.api("POST", `/v1/sandboxes/${id}/exec`, { command: ["hostname"] })));
    for (const o of outs) expect(o.body.stdout.trim()).toBe("sandbox");
    expect(qemuPidsFor(ids)).toHaveLength(20);

    await Promise.all(ids.map((id) => t.api("DELETE", `/v1/sandboxes/${id}`)));
    expect(qemuPidsFor(ids)).toEqual([]);
    for (const id of ids) {
      expect(existsSync(path.join(t.dataDir, "sandboxes", id, "disk"))).toBe(false);
    }
    // Disk overlays live among the checkpoint layers: none of these sandboxes' may remain.
    const layers = readdirSync(path.join(t.dataDir, "layers"));
    expect(layers.filter((f) => ids.some((id) => f.includes(id)))).toEqual([]);
    const runRoots = readdirSync(tmpdir()).filter((d) => d.startsWith("sandtree-") && !d.startsWith("sandtree-test-"));
    for (const r of runRoots) {
      for (const id of ids) expect(existsSync(path.join(tmpdir(), r, `sandtree-${id}`))).toBe(false);
    }
    const page1 = await t.api("GET", "/v1/sandboxes?label=batch=c20&limit=15");
    expect(page1.body.sandboxes).toHaveLength(15);
    expect(page1.body.next_cursor).toBeTruthy();
    const page2 = await t.api("GET", `/v1/sandboxes?label=batch=c20&limit=15&cursor=${page1.body.next_cursor}`);
    expect(page2.body.sandboxes).toHaveLength(5);
    expect(page2.body.sandboxes.every((s: { status: string }) => s.status === "TERMINATED")).toBe(true);
  });
});

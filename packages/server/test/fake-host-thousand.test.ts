// Many sandboxes (200 here, to keep CI short; SANDTREE_FAKE_COUNT=1000 for the full thousand)
// through the real server (API, services, store, blob store) on the fake host (no VM): each is created, written to, checkpointed with memory, forked, reset to its
// checkpoint and deleted with its fork. Shows the services need nothing of a VM, and keeps the
// life cycle's bookkeeping honest at a count no VM test reaches. No timing is asserted; the wall
// time is logged.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { FakeHost } from "@sandtree/host/fake";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ImageResolver } from "../src/services/images/image-resolver.js";
import { startTestServer, type TestServer } from "./helpers.js";

const COUNT = Number(process.env.SANDTREE_FAKE_COUNT ?? 200);
const PARALLEL = 32;

// An image base file (checkpoints check that it is there); the fake host never reads it.
const imageDir = mkdtempSync(path.join(tmpdir(), "sandtree-fake-image-"));
const basePath = path.join(imageDir, "base.ext4");
writeFileSync(basePath, "");

const images: ImageResolver = {
  resolve: async (ref) => ({
    ref,
    digest: `sha256:${"a".repeat(64)}`,
    basePath,
    virtualSizeBytes: 0,
    source: "local",
  }),
  check: async () => {},
  list: async () => [],
  importLayout: () => Promise.reject(new Error("no layouts here")),
};

describe("a thousand sandboxes on the fake host", () => {
  let t: TestServer;
  const host = new FakeHost();

  beforeAll(async () => {
    t = await startTestServer({ images, host });
    const r = await t.api("PUT", "/v1/teams/default/limits", {
      max_creations_per_10s: 100_000,
      max_active_sandboxes: 100_000,
    });
    expect(r.status).toBe(200);
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    rmSync(imageDir, { recursive: true, force: true });
  }, 60_000);

  async function running(id: string): Promise<void> {
    for (;;) {
      const r = await t.api("GET", `/v1/sandboxes/${id}`);
      if (r.body.status === "RUNNING") return;
      if (r.body.status !== "PENDING" && r.body.status !== "PROVISIONING")
        throw new Error(`${id}: ${r.body.status} ${r.body.error_reason}`);
      await new Promise((res) => setTimeout(res, 20));
    }
  }

  async function exec(id: string, command: string): Promise<{ stdout: string; exit_code: number }> {
    const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body;
  }

  async function lifeCycle(i: number): Promise<void> {
    const created = await t.api("POST", "/v1/sandboxes", { image: "fake/image", name: `s${i}` });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    await running(id);
    await exec(id, `echo ${i} > /root/n`);
    const ck = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, { include_memory: true });
    expect(ck.status, JSON.stringify(ck.body)).toBe(201);
    await exec(id, "echo changed > /root/n");
    const fork = await t.api("POST", `/v1/sandboxes/${id}/fork`, { memory: true });
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    const child = fork.body.id as string;
    await running(child);
    expect((await exec(child, "cat /root/n")).stdout).toBe("changed\n");
    const reset = await t.api("POST", `/v1/sandboxes/${id}/reset`, { checkpoint_id: ck.body.id });
    expect(reset.status, JSON.stringify(reset.body)).toBe(200);
    expect((await exec(id, "cat /root/n")).stdout).toBe(`${i}\n`);
    for (const s of [child, id]) expect((await t.api("DELETE", `/v1/sandboxes/${s}`)).status).toBe(200);
  }

  it(`creates, checkpoints, forks, resets and deletes ${COUNT} sandboxes`, { timeout: 600_000 }, async () => {
    const t0 = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: PARALLEL }, async () => {
        while (next < COUNT) await lifeCycle(next++);
      }),
    );
    const ms = Date.now() - t0;
    console.log(JSON.stringify({ sandboxes: COUNT, forks: COUNT, wall_ms: ms, starts: host.starts }));
    // Every machine stopped, and the server counts none active.
    expect(host.machines.size).toBe(0);
    expect(host.starts).toBe(3 * COUNT);
    const list = await t.api("GET", "/v1/sandboxes?status=RUNNING");
    expect(list.status).toBe(200);
  });
});

// The whole server on a remote host: its machines run on a "worker" (the host service over a
// FakeHost, on loopback) and every call of the services (start, exec, files, checkpoint with
// memory, fork, reset, delete) crosses the network through RemoteHost. Shows the services need
// nothing of a host but the interface, wherever it runs. No VM: about a second.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { connectRemoteHost, type RemoteHost, type ServedHost, serveMachineHost } from "@sandtree/host";
import { FakeHost } from "@sandtree/host/fake";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ImageResolver } from "../src/services/images/image-resolver.js";
import { startTestServer, type TestServer } from "./helpers.js";

const COUNT = 12;

// An image base file (checkpoints check that it is there); the fake host never reads it.
const imageDir = mkdtempSync(path.join(tmpdir(), "sandtree-remote-image-"));
const basePath = path.join(imageDir, "base.ext4");
writeFileSync(basePath, "");

const images: ImageResolver = {
  resolve: async (ref) => ({ ref, digest: `sha256:${"b".repeat(64)}`, basePath, virtualSizeBytes: 0, source: "local" }),
  check: async () => {},
  list: async () => [],
  importLayout: () => Promise.reject(new Error("no layouts here")),
};

describe("the server on a remote host", () => {
  let t: TestServer;
  const fake = new FakeHost();
  let worker: ServedHost;
  let host: RemoteHost;

  beforeAll(async () => {
    worker = await serveMachineHost({ host: fake, key: () => "stw_server-test" });
    host = await connectRemoteHost({ url: worker.url, key: "stw_server-test" });
    t = await startTestServer({ images, host });
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    host?.close();
    await worker?.close();
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

  it(`creates, checkpoints, forks, resets and deletes ${COUNT} sandboxes through it`, { timeout: 120_000 }, async () => {
    await Promise.all(
      Array.from({ length: COUNT }, async (_, i) => {
        const created = await t.api("POST", "/v1/sandboxes", { image: "fake/image", name: `r${i}` });
        expect(created.status, JSON.stringify(created.body)).toBe(201);
        const id = created.body.id as string;
        await running(id);
        await exec(id, `echo ${i} > /root/n`);
        const stat = await t.api("GET", `/v1/sandboxes/${id}/files/stat?path=/root/n`);
        expect(stat.body, JSON.stringify(stat.body)).toMatchObject({ type: "file", size: String(i).length + 1 });
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
      }),
    );
    // Every machine the server started on the worker is stopped there.
    expect(fake.starts).toBe(3 * COUNT);
    expect(fake.machines.size).toBe(0);
  });
});

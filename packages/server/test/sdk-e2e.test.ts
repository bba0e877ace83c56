import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { AuthenticationError, ConflictError, NotFoundError, SandtreeClient, ValidationError } from "@sandtree/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;
let client: SandtreeClient;
let id: string;
let work: string;

beforeAll(async () => {
  t = await startTestServer();
  work = mkdtempSync(path.join(tmpdir(), "sandtree-sdk-"));
  client = new SandtreeClient({ apiUrl: t.url, apiKey: t.key });
  const sb = await client.sandboxes.create({
    image: "sandtree/busybox",
    memory_gb: 0.25,
    disk_size_gb: 1,
    labels: { via: "sdk" },
  });
  id = sb.id;
  const seen: string[] = [];
  const running = await client.sandboxes.waitForCreation(id, { timeoutMs: 240_000, onProgress: (s) => seen.push(s.status) });
  expect(running.status).toBe("RUNNING");
});
afterAll(async () => {
  await t?.close();
  rmSync(work, { recursive: true, force: true });
});

describe("the SDK against a real server and VM", () => {
  it("streams stdout and stderr separately through an exec handle and waits for the exit", async () => {
    const h = await client.sandboxes.exec(id, "for i in 1 2 3; do echo out$i; echo err$i >&2; done; exit 5");
    const out: string[] = [];
    const err: string[] = [];
    await Promise.all([
      (async () => {
        for await (const c of h.stdout) out.push(Buffer.from(c).toString());
      })(),
      (async () => {
        for await (const c of h.stderr) err.push(Buffer.from(c).toString());
      })(),
    ]);
    const exit = await h.wait();
    expect(exit.exit_code).toBe(5);
    expect(out.join("")).toBe("out1\nout2\nout3\n");
    expect(err.join("")).toBe("err1\nerr2\nerr3\n");
  });

  it("kills a running command (137) and feeds stdin", async () => {
    const h = await client.sandboxes.exec(id, ["sleep", "60"]);
    expect(h.pid).toBeGreaterThan(1);
    await h.kill();
    expect((await h.wait()).exit_code).toBe(137);
    const cat = await client.sandboxes.exec(id, ["cat"], { stdinOpen: true });
    await cat.writeStdin("piped ");
    await cat.writeStdin("through");
    await cat.closeStdin();
    let text = "";
    for await (const c of cat.stdout) text += Buffer.from(c).toString();
    expect(text).toBe("piped through");
    expect((await cat.wait()).exit_code).toBe(0);
  });

  it("uploads and downloads files with equal sha256, and reads, writes, lists", async () => {
    const data = randomBytes(8 * 1024 * 1024 + 123);
    const local = path.join(work, "in.bin");
    writeFileSync(local, data);
    const up = await client.files.upload(id, local, "/root/in.bin");
    expect(up.bytes).toBe(data.length);
    await client.files.download(id, "/root/in.bin", path.join(work, "out.bin"));
    const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
    expect(sha(readFileSync(path.join(work, "out.bin")))).toBe(sha(data));
    await client.files.write(id, "/root/note.txt", "hello");
    expect(await client.files.read(id, "/root/note.txt", { encoding: "utf8" })).toBe("hello");
    const list = await client.files.list(id, "/root");
    expect(list.entries.map((e) => e.name).sort()).toEqual(["in.bin", "note.txt"]);
    await client.files.remove(id, "/root/in.bin");
    await expect(client.files.stat(id, "/root/in.bin")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("checkpoints, waits for DURABLE, restores with checkpointId and forks", { timeout: 300_000 }, async () => {
    await client.files.write(id, "/root/state.txt", "before");
    const ck = await client.checkpoints.create(id);
    const durable = await client.checkpoints.waitForCheckpoint(ck.id, { timeoutMs: 120_000 });
    expect(durable.state).toBe("DURABLE");
    expect((await client.checkpoints.list(id)).map((c) => c.id)).toContain(ck.id);
    await client.files.write(id, "/root/state.txt", "after");
    const restored = await client.sandboxes.create({ checkpointId: ck.id, memory_gb: 0.25 });
    await client.sandboxes.waitForCreation(restored.id, { timeoutMs: 240_000 });
    expect(await client.files.read(restored.id, "/root/state.txt", { encoding: "utf8" })).toBe("before");
    const child = await client.sandboxes.fork(id, { name: "child", memoryGb: 0.25 });
    expect(child.source_checkpoint_id).toBeTruthy();
    expect(child.cpu_cores).toBe(1);
    await client.sandboxes.waitForCreation(child.id, { timeoutMs: 240_000 });
    expect(await client.files.read(child.id, "/root/state.txt", { encoding: "utf8" })).toBe("after");
    await Promise.all([client.sandboxes.delete(restored.id), client.sandboxes.delete(child.id)]);
    await expect(client.checkpoints.waitForCheckpoint("ck-missing", { timeoutMs: 1000 })).rejects.toMatchObject({
      code: "CHECKPOINT_NOT_FOUND",
    });
    const gone = await client.checkpoints.delete(ck.id);
    expect(gone.stored_bytes).toBe(0);
  });

  it("raises typed errors carrying the server's code", async () => {
    await expect(client.sandboxes.get("sb-nope")).rejects.toMatchObject({ code: "SANDBOX_NOT_FOUND" });
    await expect(client.sandboxes.create({ image: "sandtree/busybox", cpu_cores: 0 })).rejects.toBeInstanceOf(ValidationError);
    await expect(client.sandboxes.create({ image: "sandtree/nope" })).rejects.toMatchObject({ code: "IMAGE_NOT_FOUND" });
    const bad = new SandtreeClient({ apiUrl: t.url, apiKey: "st_wrong" });
    await expect(bad.sandboxes.list()).rejects.toBeInstanceOf(AuthenticationError);
    const listed = await client.sandboxes.list({ labels: { via: "sdk" }, status: "RUNNING" });
    expect(listed.sandboxes.map((s) => s.id)).toEqual([id]);
    await client.sandboxes.delete(id);
    await expect(client.sandboxes.run(id, "true")).rejects.toBeInstanceOf(ConflictError);
    await expect(client.sandboxes.run(id, "true")).rejects.toMatchObject({ code: "SANDBOX_NOT_RUNNING" });
  });
});

// Shared by the server tests on a fake host (no VM): an image resolver whose base the fake host
// writes when it resolves it (checkpoints check that it is there), and one sandbox's life cycle
// through the API (create, write, checkpoint with memory, fork, reset to the checkpoint, delete).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { connectRemoteHost, LocalDirBlobStore, type RemoteHost, type ServedHost, serveMachineHost } from "@sandtree/host";
import { FakeHost } from "@sandtree/host/fake";
import { afterAll, beforeAll, expect } from "vitest";
import type { ImageResolver } from "../src/services/images/image-resolver.js";
import { startTestServer, type TestServer } from "./helpers.js";

/** Resolves every ref to one image (one base), with a digest of `digestChar`s (a hex digit). */
export function fakeImages(digestChar: string): ImageResolver {
  const digest = `sha256:${digestChar.repeat(64)}`;
  return {
    resolve: async (ref) => ({
      ref,
      digest,
      base: digest,
      virtualSizeBytes: 0,
      source: "local",
      labels: {},
    }),
    check: async () => {},
    list: async () => [],
    importLayout: () => Promise.reject(new Error("no layouts here")),
  };
}

/**
 * A test server on a new fake host for the file's tests: started before them (given to `started`)
 * and closed after them. `images` may wrap the fake images (`fakeImages(digestChar)`); `network`
 * turns sandbox networks on (the fake's are in memory); `remote` serves the fake host over the
 * host service and gives the server a RemoteHost in front of it (as a fleet worker serves its host).
 */
export function onFakeHost(o: {
  digestChar: string;
  images?: (fake: ImageResolver) => ImageResolver;
  network?: "on";
  remote?: boolean;
  started: (t: TestServer) => void | Promise<void>;
}): FakeHost {
  const images = fakeImages(o.digestChar);
  // The fake host's machines keep their run and log folders in a folder of its own, as a worker's
  // do (its volumes too: `volumes` there); its layers directory is the server's blob store's (the
  // server's data dir's `layers`).
  const hostDir = mkdtempSync(path.join(tmpdir(), "sandtree-fake-host-"));
  const dataDir = mkdtempSync(path.join(tmpdir(), "sandtree-test-"));
  const fake = new FakeHost({
    dir: hostDir,
    layersDir: path.join(dataDir, "layers"),
    images: o.images ? o.images(images) : images,
  });
  const networksDir = mkdtempSync(path.join(tmpdir(), "sandtree-remote-nets-"));
  let worker: ServedHost | undefined;
  let remote: RemoteHost | undefined;
  let t: TestServer | undefined;
  beforeAll(async () => {
    // The worker's layers port stores into its own blob store: on this machine, the server's layers directory.
    if (o.remote) {
      const blobs = new LocalDirBlobStore(path.join(dataDir, "layers"));
      worker = await serveMachineHost({ host: fake, key: () => "stw_server-test", networksDir, blobs });
      remote = await connectRemoteHost({ url: worker.url, key: "stw_server-test" });
    }
    const host = remote ?? fake;
    t = await startTestServer({
      host,
      dataDir,
      ...(o.network ? { network: o.network } : {}),
    });
    await o.started(t);
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    remote?.close();
    await worker?.close();
    rmSync(networksDir, { recursive: true, force: true });
    rmSync(hostDir, { recursive: true, force: true });
  }, 60_000);
  return fake;
}

export async function running(t: TestServer, id: string): Promise<void> {
  for (;;) {
    const r = await t.api("GET", `/v1/sandboxes/${id}`);
    if (r.body.status === "RUNNING") return;
    if (r.body.status !== "PENDING" && r.body.status !== "PROVISIONING")
      throw new Error(`${id}: ${r.body.status} ${r.body.error_reason}`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

export async function exec(t: TestServer, id: string, command: string): Promise<{ stdout: string; exit_code: number }> {
  const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

/**
 * Sandbox `name` from fake/image: writes `i` to /root/n (then runs `afterWrite`), checkpoints with
 * memory, changes the file, forks (the fork sees the change), resets to the checkpoint (the file
 * is `i` again) and deletes the fork and the sandbox. Three machine starts.
 */
export async function lifeCycle(
  t: TestServer,
  name: string,
  i: number,
  afterWrite?: (id: string) => Promise<void>,
): Promise<void> {
  const created = await t.api("POST", "/v1/sandboxes", { image: "fake/image", name });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const id = created.body.id as string;
  await running(t, id);
  await exec(t, id, `echo ${i} > /root/n`);
  await afterWrite?.(id);
  const ck = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, { include_memory: true });
  expect(ck.status, JSON.stringify(ck.body)).toBe(201);
  await exec(t, id, "echo changed > /root/n");
  const fork = await t.api("POST", `/v1/sandboxes/${id}/fork`, { memory: true });
  expect(fork.status, JSON.stringify(fork.body)).toBe(201);
  const child = fork.body.id as string;
  await running(t, child);
  expect((await exec(t, child, "cat /root/n")).stdout).toBe("changed\n");
  const reset = await t.api("POST", `/v1/sandboxes/${id}/reset`, { checkpoint_id: ck.body.id });
  expect(reset.status, JSON.stringify(reset.body)).toBe(200);
  expect((await exec(t, id, "cat /root/n")).stdout).toBe(`${i}\n`);
  for (const s of [child, id]) expect((await t.api("DELETE", `/v1/sandboxes/${s}`)).status).toBe(200);
}

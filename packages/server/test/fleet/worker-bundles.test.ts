import path from "node:path";
import { LocalDirBlobStore } from "@sandtree/host";
import { FakeHost } from "@sandtree/host/fake";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exec, fakeImages, lifeCycle, running } from "../fake-host-life.js";
import { jsonApi, startTestServer, type TestServer } from "../helpers.js";
import { tempDirs } from "../temp-dirs.js";
import { bundleOpened, type FakeWorker, registerAt, serveFakeWorker } from "./fake-worker.js";

describe("fleet: a worker's sandboxes run through its host's bundle", () => {
  const { mkdir, removeAll } = tempDirs();
  const images = fakeImages("d");
  let t: TestServer;
  let worker: FakeWorker;
  let fake: FakeHost;
  let dataDir = "";
  let adminKey = "";

  /** Registers the worker as `sandtree worker` does. */
  const register = async () => {
    const token = t.server.services.fleet.joinToken;
    await worker.join(registerAt(t.url, token, "fw"), token);
  };
  const start = async () => {
    const layersDir = path.join(dataDir, "layers");
    t = await startTestServer({
      host: new FakeHost({ dir: mkdir("sandtree-cp-host-"), layersDir, images }),
      dataDir,
      keepDataDir: true,
    });
    // A restart prints no key: the first one's goes on.
    adminKey ||= t.key;
    t = { ...t, key: adminKey, api: jsonApi(t.url, () => adminKey) };
    expect((await t.api("POST", "/v1/hosts/local/cordon")).status).toBe(200);
  };

  beforeAll(async () => {
    dataDir = mkdir("sandtree-cp-");
    // The worker's layers go to the fleet's blob store: here the control plane's layers directory.
    const layersDir = path.join(dataDir, "layers");
    worker = await serveFakeWorker(
      (dir) => {
        fake = new FakeHost({ dir, layersDir, images });
        return fake;
      },
      { blobs: new LocalDirBlobStore(layersDir) },
    );
    await start();
    await register();
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    await worker?.close();
    removeAll();
  }, 60_000);

  it("places a create on the worker and runs it there: exec, pause, resume, checkpoint, fork, reset, delete", async () => {
    await bundleOpened(t.server, "fw");
    const created = await t.api("POST", "/v1/sandboxes", { image: "fake/image" });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    await running(t, id);
    expect(fake.machines.has(`sandtree-${id}`)).toBe(true);
    expect((await exec(t, id, "echo hi")).stdout).toBe("hi\n");
    // Its network is the worker's (opened through its host), whatever the control plane's own setting.
    const port = await t.api("POST", `/v1/sandboxes/${id}/ports`, { port: 8080 });
    expect(port.status, JSON.stringify(port.body)).toBe(201);
    expect((await t.api("POST", `/v1/sandboxes/${id}/pause`)).body.status).toBe("PAUSED");
    expect((await t.api("POST", `/v1/sandboxes/${id}/resume`)).body.status).toBe("RUNNING");
    // Checkpoint with memory, fork and reset: every machine on the worker (its own host is cordoned).
    const before = fake.starts;
    await lifeCycle(t, "fw-life", 7);
    expect(fake.starts - before).toBe(3);
    expect((await t.api("DELETE", `/v1/sandboxes/${id}`)).body.status).toBe("TERMINATED");
    expect(fake.machines.size).toBe(0);
  });

  it("a restarted control plane adopts the worker's machines again", async () => {
    const created = await t.api("POST", "/v1/sandboxes", { image: "fake/image" });
    const id = created.body.id as string;
    await running(t, id);
    await exec(t, id, "echo 5 > /root/n");
    await t.close();
    // Its machine runs on: the control plane's close leaves a worker's machines alone.
    expect(fake.machines.has(`sandtree-${id}`)).toBe(true);
    await start();
    await bundleOpened(t.server, "fw");
    await t.server.services.sandboxes.whenAdopted(id);
    expect((await exec(t, id, "cat /root/n")).stdout).toBe("5\n");
    expect((await t.api("DELETE", `/v1/sandboxes/${id}`)).body.status).toBe("TERMINATED");
    expect(fake.machines.size).toBe(0);
  });

  it("a machine the worker stops by itself (its shutdown) ends its sandbox TERMINATED with that reason", async () => {
    await bundleOpened(t.server, "fw");
    const id = (await t.api("POST", "/v1/sandboxes", { image: "fake/image" })).body.id as string;
    await running(t, id);
    await fake.machines.get(`sandtree-${id}`)?.stop();
    await expect
      .poll(async () => (await t.api("GET", `/v1/sandboxes/${id}`)).body, { timeout: 10_000, interval: 20 })
      .toMatchObject({ status: "TERMINATED", error_reason: "on host fw: the server shut down" });
  });
});

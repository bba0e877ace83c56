// A worker's volumes are reached through its host's bundle, as the control plane's own are through
// its host (no VM, no worker process): a "worker" is the host service over a FakeHost on loopback,
// its blob store the fleet's bucket (s3rver). A move that a control plane stopped midway (MOVING to
// the worker in its store) is finished at its next start through the two hosts' volumes ports: the
// control plane's host packs the volume into the bucket, the worker's host unpacks it. The
// volume's measure walks it on the worker's host; the file API brings it back to the control
// plane's host (packed by the worker's, its copy there removed); a delete removes it there.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { FakeHost } from "@sandtree/host/fake";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startS3, type TestS3, useS3Credentials } from "../../../host/test/helpers/s3-server.js";
import { BlobStoreUrl, makeBlobStore } from "../../src/blob-store-config.js";
import { jsonApi, startTestServer, type TestServer } from "../helpers.js";
import { tempDirs } from "../temp-dirs.js";
import { bundleOpened, type FakeWorker, registerAt, serveFakeWorker } from "./fake-worker.js";

describe("fleet: a worker's volumes through its host's bundle", () => {
  const { mkdir, removeAll } = tempDirs();
  let restoreEnv = () => {};
  let s3: TestS3;
  let blobUrl = "";
  let t: TestServer | null = null;
  let worker: FakeWorker;
  let dataDir = "";
  let adminKey = "";
  let cpVolumes = "";
  let workerVolumes = "";

  const start = async () => {
    const host = new FakeHost({ volumesDir: cpVolumes, layersDir: path.join(dataDir, "layers") });
    t = await startTestServer({ host, dataDir, keepDataDir: true, blobStore: blobUrl });
    adminKey ||= t.key;
    t = { ...t, key: adminKey, api: jsonApi(t.url, () => adminKey) };
    expect((await t.api("POST", "/v1/hosts/local/cordon")).status).toBe(200);
  };
  const server = () => t as TestServer;
  const bundleOpen = () => server().server.services.sandboxes.bundles.named("vw") !== undefined;

  beforeAll(async () => {
    restoreEnv = useS3Credentials();
    s3 = await startS3("sandtree-volume-bundles");
    blobUrl = `s3://${s3.bucket}/vb?endpoint=${s3.endpoint}&region=us-east-1`;
    dataDir = mkdir("sandtree-vb-cp-");
    cpVolumes = path.join(mkdir("sandtree-vb-cp-host-"), "volumes");
    workerVolumes = path.join(mkdir("sandtree-vb-w-"), "volumes");
    // The worker's blob store: its own cache of the fleet's bucket, its layers directory.
    const workerLayers = mkdir("sandtree-vb-w-layers-");
    worker = await serveFakeWorker(() => new FakeHost({ volumesDir: workerVolumes, layersDir: workerLayers }), {
      blobs: makeBlobStore(BlobStoreUrl.parse(blobUrl), workerLayers),
    });
    await start();
    const token = server().server.services.fleet.joinToken;
    await worker.join(registerAt(server().url, token, "vw"), token);
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    await worker?.close();
    await s3?.close();
    restoreEnv();
    removeAll();
  }, 60_000);

  it("a move stopped midway ends on the worker's host; its measure walks it there; the file API brings it back", async () => {
    await bundleOpened(server().server, "vw");
    const made = await server().api("POST", "/v1/volumes", { name: "travels", size_gb: 1 });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const vol = made.body.id as string;
    const put = await server().api("PUT", `/v1/volumes/${vol}/files?path=/a.txt`, new TextEncoder().encode("from the API\n"));
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const cpCopy = path.join(cpVolumes, vol, "data", "a.txt");
    const workerCopy = path.join(workerVolumes, vol, "data", "a.txt");
    expect(readFileSync(cpCopy, "utf8")).toBe("from the API\n");

    // Stopped right after it recorded a move to the worker: the next start finishes it.
    await server().close();
    const db = new Database(path.join(dataDir, "sandtree.db"));
    try {
      db.prepare("UPDATE volumes SET status = 'MOVING', move_to = ? WHERE id = ?").run(worker.hostId, vol);
    } finally {
      db.close();
    }
    await start();
    expect(bundleOpen()).toBe(true);
    expect(readFileSync(workerCopy, "utf8")).toBe("from the API\n");
    expect(existsSync(path.join(cpVolumes, vol))).toBe(false);

    // A guest's write there counts: the measure walks the volume on the worker's host.
    writeFileSync(path.join(workerVolumes, vol, "data", "guest.bin"), Buffer.alloc(1000));
    expect((await server().api("GET", `/v1/volumes/${vol}`)).body).toMatchObject({ status: "READY", used_bytes: 1013 });

    // The file API brings it back to the control plane's host: the worker's copy goes.
    const got = await server().api("GET", `/v1/volumes/${vol}/files?path=/a.txt`);
    expect([got.status, got.body]).toEqual([200, "from the API\n"]);
    expect(readFileSync(cpCopy, "utf8")).toBe("from the API\n");
    expect(existsSync(path.join(workerVolumes, vol))).toBe(false);
    expect((await server().api("DELETE", `/v1/volumes/${vol}`)).status).toBe(204);
    expect(existsSync(path.join(cpVolumes, vol))).toBe(false);
  });
});

import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import { FakeHost } from "@sandtree/host/fake";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { corruptObject, startS3, type TestS3, useS3Credentials } from "../../../host/test/helpers/s3-server.js";
import { type Api, serverForFile, stopChildProcess } from "../helpers.js";
import { bundleOpened, serveFakeWorker } from "./fake-worker.js";
import {
  checkpointRowIn,
  idsOnWorker,
  qemuPidsOf,
  SMALL,
  twoWorkerFleetForFile,
  until,
  type Worker,
  waitRunning,
  workerHoldsNoRecords,
} from "./worker-harness.js";

const PREFIX = "fleet-ck";

describe("fleet: checkpoints on workers, forks and restores through the object store", () => {
  let restoreEnv = () => {};
  let s3: TestS3;
  let cpDir = "";
  let blobStore = "";
  let api: Api;
  let wa: Worker;
  let wb: Worker;

  const run = async (id: string, command: string) => {
    const r = await api("POST", `/v1/sandboxes/${id}/exec`, { command });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body as { exit_code: number; stdout: string };
  };
  const object = (key: string) => s3.client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: `${PREFIX}/${key}` }));
  /** Follows a checkpoint to DURABLE; whenever the control plane says DURABLE, its object is in the bucket. */
  const durable = async (cid: string) => {
    const read = async () => {
      const r = await api("GET", `/v1/checkpoints/${cid}`);
      expect(r.status).toBe(200);
      expect(["PENDING", "FROZEN", "DURABLE"], JSON.stringify(r.body)).toContain(r.body.state);
      return r.body as { state: string };
    };
    await until(`checkpoint ${cid} not DURABLE`, read, (c) => c.state === "DURABLE", { ms: 120_000, everyMs: 100 });
    const row = checkpointRowIn(cpDir, cid);
    expect(row?.blob_key && row.sha256).toBeTruthy();
    const head = await object(row?.blob_key as string);
    expect(head.Metadata?.sha256).toBe(row?.sha256);
    return row as { blob_key: string; sha256: string; parent_id: string | null };
  };
  const checkpoint = async (sandbox: string) => {
    const r = await api("POST", `/v1/sandboxes/${sandbox}/checkpoints`, {});
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.id as string;
  };
  const sha256Of = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

  beforeAll(async () => {
    s3 = await startS3();
    // Every process takes the object store's credentials from the standard AWS variables.
    restoreEnv = useS3Credentials();
    blobStore = `s3://${s3.bucket}/${PREFIX}?endpoint=${s3.endpoint}&region=us-east-1`;
  });
  // Runs after the fleet is stopped (hooks registered later run first).
  afterAll(async () => {
    await s3?.close();
    restoreEnv();
  });
  // Only the control plane is given the blob store: workers learn it when they join.
  const fleet = twoWorkerFleetForFile(
    () => ({ SANDTREE_BLOB_STORE: blobStore }),
    (f) =>
      ({
        api,
        dir: cpDir,
        workers: [wa, wb],
      } = f),
  );

  it("tells joining workers its object store, and refuses one that names another", async () => {
    expect(wa.output()).toContain(`checkpoint layers in s3://${s3.bucket}/${PREFIX}/`);
    const token = readFileSync(path.join(cpDir, "join-token"), "utf8").trim();
    const join = (blob_store: string) =>
      api(
        "POST",
        "/v1/fleet/hosts/register",
        { name: "wz", capacity: { vcpus: 2, memory_mib: 1024, disk_gib: 10, accel: "tcg" }, blob_store },
        { authorization: `Bearer ${token}` },
      );
    const other = await join(`s3://${s3.bucket}/elsewhere?endpoint=${s3.endpoint}`);
    expect([other.status, other.body.code]).toEqual([409, "BLOB_STORE_MISMATCH"]);
    const local = await join("/var/tmp/layers");
    expect([local.status, local.body.code]).toEqual([409, "BLOB_STORE_MISMATCH"]);
    expect((await api("GET", "/v1/hosts")).body.hosts.map((h: { name: string }) => h.name)).not.toContain("wz");
  });

  it("checkpoints a sandbox on its worker (DURABLE once in the bucket), forks it onto another, resets it there", async () => {
    const r = await api("POST", "/v1/sandboxes", { ...SMALL, cpu_cores: 1, host: "wa" });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const src = r.body.id as string;
    await waitRunning(api, src);
    expect(idsOnWorker(wa)).toContain(src);
    expect((await run(src, "mkdir -p /srv && echo from-wa > /srv/note && sync")).exit_code).toBe(0);

    const ck = await checkpoint(src);
    const row = await durable(ck);
    // The worker's host took it and holds the same layer (the record is the control plane's only).
    expect(sha256Of(path.join(wa.dir, "layers", row.blob_key))).toBe(row.sha256);
    expect(workerHoldsNoRecords(wa)).toBe(true);
    const listed = await api("GET", `/v1/sandboxes/${src}/checkpoints`);
    expect(listed.body.checkpoints.map((c: { id: string }) => c.id)).toEqual([ck]);

    const f = await api("POST", `/v1/sandboxes/${src}/fork`, { host: "wb" });
    expect(f.status, JSON.stringify(f.body)).toBe(201);
    const child = f.body.id as string;
    await waitRunning(api, child);
    expect(idsOnWorker(wb)).toContain(child);
    expect((await run(child, "cat /srv/note")).stdout).toBe("from-wa\n");

    // wb never ran the source: it has the chain's layers because it pulled them from the bucket,
    // and checked them (the marker records the sha256 it verified).
    const forkCk = (await api("GET", `/v1/sandboxes/${src}/checkpoints`)).body.checkpoints.find(
      (c: { id: string }) => c.id !== ck,
    ).id as string;
    const forkRow = await durable(forkCk);
    expect(forkRow.parent_id).toBe(ck);
    for (const layer of [row, forkRow]) {
      const file = path.join(wb.dir, "layers", layer.blob_key);
      expect(sha256Of(file)).toBe(layer.sha256);
      expect(readFileSync(path.join(wb.dir, "layers", `.verified-${layer.blob_key}`), "utf8")).toContain(layer.sha256);
    }
    expect(workerHoldsNoRecords(wb)).toBe(true);
    expect((await api("DELETE", `/v1/sandboxes/${child}`)).status).toBe(200);

    // A memory fork onto wb: the memory file is in the bucket too, so the child on wb goes on
    // with the parent's processes (a count kept in a shell's memory).
    const job = await api("POST", `/v1/sandboxes/${src}/jobs`, {
      command: "i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.2; done",
    });
    expect(job.status, JSON.stringify(job.body)).toBe(201);
    const count = async (id: string) => Number((await run(id, "cat /tmp/count 2>/dev/null || echo 0")).stdout);
    await expect.poll(() => count(src), { timeout: 30_000 }).toBeGreaterThan(2);
    const atFork = await count(src);
    const m = await api("POST", `/v1/sandboxes/${src}/fork`, { host: "wb", memory: true });
    expect(m.status, JSON.stringify(m.body)).toBe(201);
    await waitRunning(api, m.body.id);
    expect(idsOnWorker(wb)).toContain(m.body.id);
    const c1 = await count(m.body.id);
    expect(c1).toBeGreaterThanOrEqual(atFork);
    await expect.poll(() => count(m.body.id), { timeout: 30_000 }).toBeGreaterThan(c1);
    expect((await api("DELETE", `/v1/sandboxes/${m.body.id}`)).status).toBe(200);

    // A reset of the source to that memory checkpoint runs on wa, where it lives: its disk goes
    // back too (a file written since is gone) and its processes run on.
    const cks = (await api("GET", `/v1/sandboxes/${src}/checkpoints`)).body.checkpoints;
    const memCk = cks.find((c: { has_memory: boolean }) => c.has_memory).id as string;
    expect((await run(src, "echo later > /srv/later && sync")).exit_code).toBe(0);
    const reset = await api("POST", `/v1/sandboxes/${src}/reset`, { checkpoint_id: memCk });
    expect([reset.status, reset.body.id, reset.body.status], JSON.stringify(reset.body)).toEqual([200, src, "RUNNING"]);
    expect((await run(src, "test -e /srv/later; echo $?")).stdout).toBe("1\n");
    const r1 = await count(src);
    await expect.poll(() => count(src), { timeout: 30_000 }).toBeGreaterThan(r1);
  });

  it("refuses a corrupted object with CHECKPOINT_CORRUPT, and restores on wb after wa is killed -9", async () => {
    const src = idsOnWorker(wa)[0] as string;
    expect((await run(src, "echo second > /srv/two && sync")).exit_code).toBe(0);
    const ck = await checkpoint(src);
    const row = await durable(ck);
    const Key = `${PREFIX}/${row.blob_key}`;
    const original = await s3.client.send(new GetObjectCommand({ Bucket: s3.bucket, Key }));
    const bytes = Buffer.from(await (original.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
    await corruptObject(s3, Key, original.Metadata ?? {});
    const bad = await api("POST", "/v1/sandboxes", { checkpoint_id: ck, host: "wb" });
    expect([bad.status, bad.body.code], JSON.stringify(bad.body)).toEqual([422, "CHECKPOINT_CORRUPT"]);
    expect(existsSync(path.join(wb.dir, "layers", row.blob_key))).toBe(false);

    // The object mended; the worker that took the checkpoint is gone for good.
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key, Body: bytes, Metadata: original.Metadata ?? {} }));
    fleet().orphans.push(...qemuPidsOf(src));
    await stopChildProcess(wa.proc, "SIGKILL");
    const r = await api("POST", "/v1/sandboxes", { checkpoint_id: ck, host: "wb" });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    await waitRunning(api, r.body.id);
    expect(idsOnWorker(wb)).toContain(r.body.id);
    expect((await run(r.body.id, "cat /srv/note /srv/two")).stdout).toBe("from-wa\nsecond\n");
    expect(sha256Of(path.join(wb.dir, "layers", row.blob_key))).toBe(row.sha256);

    // Deleted on the control plane, its only record (the layer stays on wb while the restored
    // sandbox runs on it).
    expect((await api("DELETE", `/v1/checkpoints/${ck}`)).status).toBe(200);
    expect(workerHoldsNoRecords(wb)).toBe(true);
  });
});

describe("fleet without an object store: checkpoints stay on the host that took them", () => {
  const t = serverForFile();

  it("places a restore only where the layers are, and refuses a pin elsewhere with CHECKPOINT_NOT_ON_HOST", async () => {
    const token = readFileSync(path.join(t.dataDir, "join-token"), "utf8").trim();
    const register = (extra: Record<string, unknown>) =>
      t.api(
        "POST",
        "/v1/fleet/hosts/register",
        // Far more room than this host: placement by room alone would pick it.
        { name: "wfar", capacity: { vcpus: 512, memory_mib: 1 << 20, disk_gib: 10_000, accel: "tcg" }, ...extra },
        { authorization: `Bearer ${token}` },
      );
    const refused = await register({ url: "http://127.0.0.1:9", blob_store: "s3://layers/x?endpoint=http://127.0.0.1:9" });
    expect([refused.status, refused.body.code]).toEqual([409, "BLOB_STORE_MISMATCH"]);
    // A worker that joined, serving a host of its own (a fake one: no machine may start there here).
    const worker = await serveFakeWorker((dir) => new FakeHost({ dir }));
    onTestFinished(() => worker.close());
    const joined = await worker.join(register, token);
    expect(joined.blob_store).toBeNull();
    await bundleOpened(t.server, "wfar");

    const p = await t.api("POST", "/v1/sandboxes", { ...SMALL, cpu_cores: 1, host: "local" });
    expect(p.status, JSON.stringify(p.body)).toBe(201);
    await t.waitRunning(p.body.id);
    expect(
      (await t.api("POST", `/v1/sandboxes/${p.body.id}/exec`, { command: "echo here > /keep && sync" })).body.exit_code,
    ).toBe(0);
    const ck = await t.api("POST", `/v1/sandboxes/${p.body.id}/checkpoints`, {});
    await expect
      .poll(async () => (await t.api("GET", `/v1/checkpoints/${ck.body.id}`)).body.state, { timeout: 60_000 })
      .toBe("DURABLE");

    // The worker is fresh (it beats now), has room, and is still refused: the layers are here.
    const beat = await t.api(
      "POST",
      `/v1/fleet/hosts/${joined.host_id}/heartbeat`,
      {},
      {
        authorization: `Bearer ${joined.secret}`,
      },
    );
    expect(beat.status).toBe(200);
    const pinned = await t.api("POST", "/v1/sandboxes", { checkpoint_id: ck.body.id, host: "wfar" });
    expect([pinned.status, pinned.body.code, pinned.body.details?.host]).toEqual([409, "CHECKPOINT_NOT_ON_HOST", "wfar"]);
    const placed = await t.api("POST", "/v1/sandboxes", { checkpoint_id: ck.body.id });
    expect(placed.status, JSON.stringify(placed.body)).toBe(201);
    await t.waitRunning(placed.body.id);
    expect((await t.api("POST", `/v1/sandboxes/${placed.body.id}/exec`, { command: "cat /keep" })).body.stdout).toBe("here\n");
  });
});

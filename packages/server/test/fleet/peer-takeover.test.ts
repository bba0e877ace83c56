// Two control planes on one PostgreSQL and one worker that serves a fake host (no VM): a sandbox
// one control plane placed on the worker is reached through the other (exec, delete) while its
// placer supervises it (its exit recorded once, by its placer); once the placer stops and its own
// host is LOST, the survivor takes its sandboxes over: the running one supervised there (exec, its
// exit recorded), a start the worker finished ("its start finished here"), a start the worker never
// ran ended HOST_LOST, a placement never admitted released. Time is a ManualClock.
import { copyFileSync, readFileSync } from "node:fs";
import path from "node:path";
import { LocalDirBlobStore } from "@sandtree/host";
import { FakeHost } from "@sandtree/host/fake";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, PgStore, type RunningServer, startServer } from "../../src/index.js";
import { fakeImages } from "../fake-host-life.js";
import { type Api, jsonApi } from "../helpers.js";
import { type PgServer, startPostgres } from "../postgres-server.js";
import { admitted } from "../store/fixtures.js";
import { tempDirs } from "../temp-dirs.js";
import { type FakeWorker, registerAt, serveFakeWorker, WORKER_CAPACITY } from "./fake-worker.js";

const BOUND_MS = 30_000;

describe("fleet: a peer control plane's sandboxes on a worker, reached and taken over", () => {
  let db: PgServer;
  let url = "";
  let store: PgStore;
  const { mkdir, removeAll } = tempDirs();
  const images = fakeImages("e");
  const clock = new ManualClock(Date.parse("2026-06-01T00:00:00Z"));
  let a: RunningServer;
  let b: RunningServer;
  let fake: FakeHost;
  let worker: FakeWorker;
  let secret = "";
  let hostId = "";
  let adminKey = "";
  const api = (s: RunningServer): Api => jsonApi(s.url, () => adminKey);
  const nameOf = (s: RunningServer) => readFileSync(path.join(s.dataDir, "local-host-name"), "utf8").trim();

  // One layers directory is every host's and both control planes' blob store (as one bucket would be).
  let layersDir = "";
  const start = async (dir: string) =>
    startServer(
      {
        dataDir: dir,
        database: url,
        blobStore: layersDir,
        host: "127.0.0.1",
        port: 0,
        logger: false,
        network: "off",
        hostLostAfterMs: BOUND_MS,
      },
      { fleetClock: clock, host: new FakeHost({ dir: mkdir("sandtree-pt-cph-"), layersDir, images }) },
    );
  const status = async (s: RunningServer, id: string) => (await api(s)("GET", `/v1/sandboxes/${id}`)).body;
  const exec = (s: RunningServer, id: string, command: string) => api(s)("POST", `/v1/sandboxes/${id}/exec`, { command });
  const create = async (s: RunningServer) => {
    const r = await api(s)("POST", "/v1/sandboxes", { image: "fake/image" });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    await expect.poll(async () => (await status(s, r.body.id)).status).not.toMatch(/PENDING|PROVISIONING/);
    expect(await status(s, r.body.id)).toMatchObject({ status: "RUNNING" });
    return r.body.id as string;
  };
  const bundleOf = (s: RunningServer) => s.services.sandboxes.bundles.named("fw");

  beforeAll(async () => {
    db = await startPostgres();
    url = await db.createDatabase("peers");
    layersDir = mkdir("sandtree-pt-layers-");
    const aDir = mkdir("sandtree-pt-a-");
    a = await start(aDir);
    adminKey = a.firstKey ?? "";
    const bDir = mkdir("sandtree-pt-b-");
    for (const f of ["server.key", "join-token"]) copyFileSync(path.join(aDir, f), path.join(bDir, f));
    b = await start(bDir);
    store = await PgStore.open(url, { poolSize: 2 });
    for (const s of [a, b]) expect((await api(s)("POST", `/v1/hosts/${nameOf(s)}/cordon`)).status).toBe(200);
    worker = await serveFakeWorker(
      (dir) => {
        fake = new FakeHost({ dir, layersDir, images });
        return fake;
      },
      { blobs: new LocalDirBlobStore(layersDir) },
    );
    // The worker registers at A only; B opens its host after a reaping (catchUp).
    const token = a.services.fleet.joinToken;
    const joined = await worker.join(
      registerAt(a.url, token, "fw", { ...WORKER_CAPACITY, vcpus: 16, memory_mib: 32_768 }),
      token,
    );
    hostId = joined.host_id;
    secret = joined.secret;
  }, 120_000);

  afterAll(async () => {
    for (const s of [a, b]) await s?.close().catch(() => {});
    await worker?.close();
    await store?.close();
    await db?.stop();
    removeAll();
  }, 60_000);

  it("a sandbox A placed answers through B, whose bundle leaves its supervision to A; its exit is recorded once; a delete through B stops it", async () => {
    await expect.poll(() => bundleOf(a) !== undefined, { timeout: 10_000, interval: 20 }).toBe(true);
    await b.services.fleet.reap();
    await expect.poll(() => bundleOf(b) !== undefined, { timeout: 10_000, interval: 20 }).toBe(true);
    const id = await create(a);
    const ex = await exec(b, id, "echo hi");
    expect([ex.status, ex.body.stdout]).toEqual([200, "hi\n"]);
    // B opened its host while A's sandboxes ran there and left them alone; it supervises none of them.
    expect(bundleOf(b)?.machines.has(id)).toBe(false);
    expect(bundleOf(a)?.machines.has(id)).toBe(true);
    fake.machines.get(`sandtree-${id}`)?.forceKill();
    await expect.poll(async () => (await status(b, id)).status, { timeout: 10_000, interval: 20 }).toBe("ERROR");
    await new Promise((r) => setTimeout(r, 200));
    const errors = (await store.listEvents(id, 100)).filter((e) => e.message.startsWith("error:"));
    expect(errors).toHaveLength(1);
    expect((await exec(b, id, "echo hi")).body.code).toBe("SANDBOX_NOT_RUNNING");

    const other = await create(a);
    // A reset would replace the machine A supervises: refused through B.
    const ck = await api(a)("POST", `/v1/sandboxes/${other}/checkpoints`, { include_memory: true });
    expect(ck.status, JSON.stringify(ck.body)).toBe(201);
    await expect
      .poll(async () => (await api(a)("GET", `/v1/checkpoints/${ck.body.id}`)).body.state, { timeout: 10_000, interval: 20 })
      .toMatch(/READY|DURABLE/);
    const reset = await api(b)("POST", `/v1/sandboxes/${other}/reset`, { checkpoint_id: ck.body.id });
    expect([reset.status, reset.body.code]).toEqual([501, "NOT_ON_REMOTE_HOST"]);
    expect((await exec(a, other, "echo still")).body.stdout).toBe("still\n");
    expect((await api(b)("DELETE", `/v1/sandboxes/${other}`)).body.status).toBe("TERMINATED");
    expect(fake.machines.has(`sandtree-${other}`)).toBe(false);
    expect((await status(a, other)).status).toBe("TERMINATED");
  });

  it("A stops: B takes over what it placed on the worker once A's host is LOST", async () => {
    const ask = (id: string) => ({ sandbox_id: id, vcpus: 1, memory_mib: 1024, disk_gib: 1, layers: [], host: "fw" });
    const team = await store.getTeamByName("default");
    const reached = await create(a);
    // B reaches it before A stops: the machine it holds for access becomes the one it supervises.
    expect((await exec(b, reached, "echo 1 > /root/n")).status).toBe(200);
    const unreached = await create(a);
    // A start the worker finished and A had not yet recorded.
    const finished = await create(a);
    await store.updateSandbox(finished, { status: "PROVISIONING" }, ["RUNNING"]);
    // A start the worker never ran, and a placement A never admitted.
    const never = await admitted(store, team?.id ?? "");
    await a.services.fleet.placeSandbox(ask(never.id), undefined, { startsHere: true });
    await a.services.fleet.placeSandbox(ask("sb-notadmitted"), undefined, { startsHere: true });
    const aName = nameOf(a);
    // A stops as a killed process would for the worker: its machines run on.
    await a.close();
    for (const id of [reached, unreached, finished]) expect(fake.machines.has(`sandtree-${id}`)).toBe(true);
    // Nothing is taken over while A's host is not LOST.
    await b.services.fleet.reap();
    expect(bundleOf(b)?.machines.has(unreached)).toBe(false);
    clock.advance(BOUND_MS + 1000);
    const beat = await jsonApi(b.url, () => secret)("POST", `/v1/fleet/hosts/${hostId}/heartbeat`, {});
    expect(beat.status).toBe(200);
    await b.services.fleet.reap();
    for (const id of [reached, unreached, finished]) {
      await expect.poll(() => bundleOf(b)?.machines.has(id), { timeout: 10_000, interval: 20 }).toBe(true);
      expect((await status(b, id)).status).toBe("RUNNING");
    }
    expect((await exec(b, reached, "cat /root/n")).body.stdout).toBe("1\n");
    expect((await exec(b, unreached, "echo hi")).body.stdout).toBe("hi\n");
    const events = await store.listEvents(finished, 100);
    expect(events.some((e) => e.message.includes("its start finished here"))).toBe(true);
    await expect.poll(async () => (await status(b, never.id)).status, { timeout: 10_000, interval: 20 }).toBe("ERROR");
    expect((await status(b, never.id)).error_reason).toBe(
      `HOST_LOST: control plane ${aName}, which was starting it on host fw, stopped before its host ran it`,
    );
    await expect.poll(() => b.services.fleet.placedOn("sb-notadmitted"), { timeout: 10_000, interval: 20 }).toBeNull();
    expect(await b.services.fleet.placedOn(never.id)).toBeNull();
    // Each is B's now: its exit reaches its status, through B.
    const placed = await b.services.fleet.placementsOn(hostId);
    for (const id of [reached, unreached, finished]) expect(placed.mine.has(id)).toBe(true);
    fake.machines.get(`sandtree-${unreached}`)?.forceKill();
    await expect.poll(async () => (await status(b, unreached)).status, { timeout: 10_000, interval: 20 }).toBe("ERROR");
    expect((await api(b)("DELETE", `/v1/sandboxes/${finished}`)).body.status).toBe("TERMINATED");
    expect(fake.machines.has(`sandtree-${finished}`)).toBe(false);
  });
});

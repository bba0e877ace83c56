// Fleet mode end to end, as #18's "Done when" asks (fleet-checkpoints.test.ts covers checkpoints deeper):
// a real PostgreSQL, an S3 server (s3rver on loopback), two control planes (`sandtree serve`
// children on that database and bucket, sharing one join token and server key, as replicas do)
// and three `sandtree worker` children, each with its own data dir in its own network namespace,
// joined to both control planes. A checkpoint taken on w1 forks onto w2 and, after w1's kill -9,
// restores on another worker from the bucket. Runs as root (ip netns). Bounds are small (heartbeat
// 1 s, a host silent 12 s is LOST: 5 s was crossed by a worker starved of CPU while 12 VMs booted on
// 2 cores at load 22) and every wait polls under a generous deadline: no timing assertion.
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { S3RVER_CREDENTIALS, startS3, type TestS3 } from "../../../host/test/helpers/s3-server.js";
import { type Api, jsonApi, runCli, stopChildProcess } from "../helpers.js";
import { type PgServer, startPostgres } from "../postgres-server.js";
import { createFleetNets, type FleetNets } from "./fleet-netns.js";
import {
  type ControlPlane,
  ENDED,
  idsOnWorker,
  SMALL,
  startControlPlane,
  startWorkerIn,
  until,
  type Worker,
  workerHoldsNoRecords,
} from "./worker-harness.js";

const CP_ENV = { SANDTREE_HEARTBEAT_INTERVAL_MS: "1000", SANDTREE_HOST_LOST_AFTER_MS: "12000" };
type Sb = { id: string; status: string; error_reason: string | null; labels: Record<string, string> };

describe("fleet: PostgreSQL + S3, two control planes, three workers in their own network namespaces", () => {
  let db: PgServer;
  let dbUrl = "";
  let sql: pg.Client;
  let s3: TestS3;
  let nets: FleetNets;
  const dirs: string[] = [];
  const cps: ControlPlane[] = [];
  const workers: Worker[] = [];
  let key = "";
  /** Calls go to B once A is killed. */
  let api: Api;

  const mkdir = (name: string) => {
    const d = mkdtempSync(path.join(tmpdir(), `sandtree-${name}-`));
    dirs.push(d);
    return d;
  };
  const sandbox = async (id: string) => (await api("GET", `/v1/sandboxes/${id}`)).body as Sb;
  const settled = (id: string) =>
    until(
      id,
      () => sandbox(id),
      (s) => s.status === "RUNNING" || ENDED.includes(s.status),
    );
  const hosts = async () =>
    (await api("GET", "/v1/hosts")).body.hosts as Array<{ name: string; state: string; usage: { placements: number } }>;
  /** Sandbox id -> host name, from the shared placements table. */
  const placements = async (ids: string[]) => {
    const r = await sql.query<{ sandbox_id: string; name: string }>(
      "SELECT p.sandbox_id, h.name FROM placements p JOIN hosts h ON h.id = p.host_id WHERE p.sandbox_id = ANY($1)",
      [ids],
    );
    return new Map(r.rows.map((x) => [x.sandbox_id, x.name]));
  };
  /** Which workers' hosts run (or ran) each id's machine. */
  const holders = (ids: string[]) => {
    const held = new Map<string, string[]>(ids.map((id) => [id, []]));
    for (const w of workers) for (const id of idsOnWorker(w)) held.get(id)?.push(w.name);
    return held;
  };
  const removeAll = async (ids: string[]) => {
    for (const id of ids) expect((await api("DELETE", `/v1/sandboxes/${id}`)).status).toBeLessThan(300);
  };

  beforeAll(async () => {
    db = await startPostgres();
    dbUrl = await db.createDatabase("fleet_done");
    sql = new pg.Client({ connectionString: dbUrl });
    await sql.connect();
    nets = createFleetNets(3);
    // The control planes and the object store listen where the namespaces reach this one (the
    // first veth's host end): workers store and fetch checkpoint layers in the bucket themselves.
    const listen = nets.nets[0]?.hostAddress ?? "";
    s3 = await startS3("sandtree-fleet", listen);
    const blob = `s3://${s3.bucket}/fleet?endpoint=${s3.endpoint}&region=us-east-1`;
    const env = {
      ...CP_ENV,
      AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
    };
    const args = ["--database", dbUrl, "--blob-store", blob];
    const a = await startControlPlane(mkdir("cp-a"), { listen, args, env });
    cps.push(a);
    key = a.key;
    // Replicas hold the same join token and server key.
    const bDir = mkdir("cp-b");
    for (const f of ["join-token", "server.key"]) copyFileSync(path.join(a.dir, f), path.join(bDir, f));
    cps.push(await startControlPlane(bDir, { listen, args, env }));
    api = jsonApi(a.url, () => key);
    // Every sandbox goes to a worker: the control planes' own hosts take none.
    for (const cp of cps) expect((await api("POST", `/v1/hosts/${cp.hostName()}/cordon`)).status).toBe(200);
    const token = readFileSync(path.join(a.dir, "join-token"), "utf8").trim();
    for (const [i, net] of nets.nets.entries()) {
      const name = `w${i + 1}`;
      // 16 vCPUs offered on a 2-core machine: small idle guests overcommit well.
      const w = await startWorkerIn(net.ns, {
        joinUrls: cps.map((c) => c.url),
        token,
        name,
        dir: mkdir(name),
        listen: `${net.address}:0`,
        args: ["--vcpus", "16"],
        // Workers store and fetch layers in the bucket with their own credentials.
        env: { AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId, AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey },
      });
      workers.push(w);
    }
  }, 600_000);

  afterAll(async () => {
    for (const w of workers) await stopChildProcess(w.proc, "SIGTERM");
    for (const cp of cps) await stopChildProcess(cp.proc, "SIGTERM");
    // What a worker killed with SIGKILL left running (its VMs) is in its namespace: killed by PID there.
    nets?.destroy();
    await sql?.end().catch(() => {});
    await s3?.close();
    await db?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }, 300_000);

  it("12 creates through both control planes spread over the three workers; the workers hold no sandbox records", async () => {
    const [a, b] = cps as [ControlPlane, ControlPlane];
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const r = await jsonApi(i % 2 ? b.url : a.url, () => key)("POST", "/v1/sandboxes", SMALL);
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      ids.push(r.body.id as string);
    }
    for (const id of ids) {
      const s = await settled(id);
      expect(s.status, JSON.stringify(s)).toBe("RUNNING");
    }
    const placed = await placements(ids);
    const held = holders(ids);
    for (const id of ids) expect(held.get(id), id).toEqual([placed.get(id)]);
    const per = Object.fromEntries(workers.map((w) => [w.name, ids.filter((id) => placed.get(id) === w.name).length]));
    expect(
      Object.values(per).reduce((x, y) => x + y, 0),
      JSON.stringify(per),
    ).toBe(12);
    for (const w of workers) expect(per[w.name], JSON.stringify(per)).toBeGreaterThan(0);
    for (const w of workers) expect(workerHoldsNoRecords(w), w.name).toBe(true);
    // The worker answers through either control plane.
    const ex = await jsonApi(b.url, () => key)("POST", `/v1/sandboxes/${ids[0]}/exec`, { command: "echo hi" });
    expect([ex.status, ex.body.stdout]).toEqual([200, "hi\n"]);
    await removeAll(ids);
  }, 600_000);

  it("a drained worker gets no new sandbox while the others do", async () => {
    const a = cps[0] as ControlPlane;
    const drained = await runCli({ url: a.url, key }, ["host", "drain", "w3"]);
    expect(drained.code, drained.stderr).toBe(0);
    const before = idsOnWorker(workers[2] as Worker);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await api("POST", "/v1/sandboxes", SMALL);
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      ids.push(r.body.id as string);
    }
    for (const id of ids) expect((await settled(id)).status).toBe("RUNNING");
    const placed = [...(await placements(ids)).values()];
    expect(placed).toHaveLength(4);
    expect(placed).not.toContain("w3");
    expect(new Set(placed)).toEqual(new Set(["w1", "w2"]));
    expect(idsOnWorker(workers[2] as Worker)).toEqual(before);
    expect((await hosts()).find((h) => h.name === "w3")?.state).toBe("CORDONED");
    await removeAll(ids);
    expect((await api("POST", "/v1/hosts/w3/uncordon")).status).toBe(200);
  }, 600_000);

  it("kill -9 of one control plane mid-burst: no create lost, none placed twice; workers fail over", async () => {
    const [a, b] = cps as [ControlPlane, ControlPlane];
    const keys = Array.from({ length: 16 }, (_, i) => `burst-${i}`);
    const create = (url: string, k: string) =>
      jsonApi(url, () => key)("POST", "/v1/sandboxes", { ...SMALL, idempotency_key: k, labels: { run: "burst", key: k } });
    const answeredByA = new Map<string, string>();
    let answers = 0;
    // All 16 fired at A at once; A is killed with SIGKILL once three have been answered.
    const killed = new Promise<void>((resolve) => {
      const fired = keys.map((k) =>
        create(a.url, k).then(
          (r) => {
            if (r.status === 201 || r.status === 200) answeredByA.set(k, r.body.id as string);
            if (++answers === 3) resolve();
          },
          () => {},
        ),
      );
      void Promise.all(fired).then(() => resolve());
    });
    await killed;
    await stopChildProcess(a.proc, "SIGKILL");
    api = jsonApi(b.url, () => key);
    // The client retries each create A did not answer at B, with the same key.
    const byKey = new Map(answeredByA);
    for (const k of keys) {
      if (byKey.has(k)) continue;
      const r = await create(b.url, k);
      expect([200, 201], JSON.stringify(r.body)).toContain(r.status);
      byKey.set(k, r.body.id as string);
    }
    expect(answeredByA.size).toBeGreaterThan(0);
    expect(answeredByA.size).toBeLessThan(16);
    // Every key ends with its sandbox RUNNING, or ended with a reason (none left starting).
    const ids = [...byKey.values()];
    for (const id of ids) {
      const s = await settled(id);
      if (s.status !== "RUNNING") expect(s, id).toMatchObject({ status: "ERROR", error_reason: expect.stringMatching(/\S/) });
    }
    // Exactly one sandbox per key, as the client lists them.
    const listed = (await api("GET", "/v1/sandboxes?label=run=burst&limit=1000")).body.sandboxes as Sb[];
    expect(listed.map((s) => s.labels.key).sort()).toEqual([...keys].sort());
    expect(new Set(listed.map((s) => s.id))).toEqual(new Set(ids));
    // The creates A was starting when it died (the last it answered, at least: no VM boots in the
    // moment before the kill) were taken over by B: finished from the worker's answer, or ended
    // with the reason when the worker never got them. Without that they would stay PROVISIONING.
    const finished = await sql.query<{ sandbox_id: string }>(
      "SELECT DISTINCT sandbox_id FROM sandbox_events WHERE sandbox_id = ANY($1) AND message LIKE '%its start finished here%'",
      [ids],
    );
    const ended = (await Promise.all(ids.map(sandbox))).filter((s) => /^HOST_LOST: control plane /.test(s.error_reason ?? ""));
    expect(finished.rows.length + ended.length).toBeGreaterThan(0);
    // None placed twice: one placement per running sandbox, on the one worker whose store holds it.
    const running = (await Promise.all(ids.map(sandbox))).filter((s) => s.status === "RUNNING").map((s) => s.id);
    const placed = await placements(running);
    const held = holders(ids);
    for (const id of ids) expect(held.get(id)?.length ?? 0, id).toBeLessThanOrEqual(1);
    for (const id of running) expect(held.get(id), id).toEqual([placed.get(id)]);
    // A placement A recorded for a create it never admitted is given back.
    await until(
      "placements without a sandbox",
      async () =>
        (await sql.query("SELECT p.sandbox_id FROM placements p LEFT JOIN sandboxes s ON s.id = p.sandbox_id WHERE s.id IS NULL"))
          .rows,
      (rows) => rows.length === 0,
    );
    // A's own host is LOST; the workers it registered went on beating at B.
    const aName = a.hostName();
    const after = await until("A's host LOST", hosts, (hs) => hs.find((h) => h.name === aName)?.state === "LOST");
    for (const w of workers) expect(after.find((h) => h.name === w.name)?.state, w.name).toBe("ACTIVE");
    for (const w of workers) expect(w.output()).toContain(`now using ${b.url}`);
  }, 600_000);

  it("kill -9 of a worker: its sandboxes become ERROR HOST_LOST, the others' run on; its checkpoint forks and restores elsewhere", async () => {
    // One pinned to each worker (an admin's pin), beside what runs already.
    const pinned: Record<string, string> = {};
    for (const w of ["w1", "w2", "w3"]) {
      const r = await api("POST", "/v1/sandboxes", { ...SMALL, host: w });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      pinned[w] = r.body.id as string;
    }
    for (const id of Object.values(pinned)) expect((await settled(id)).status).toBe("RUNNING");
    // A checkpoint taken on w1 (DURABLE: in the bucket), forked onto w2 (through B: A is dead): the child reads w1's file.
    const src = pinned.w1 as string;
    const wrote = await api("POST", `/v1/sandboxes/${src}/exec`, { command: "echo from-w1 > /keep && sync" });
    expect(wrote.body.exit_code, JSON.stringify(wrote.body)).toBe(0);
    const ck = await api("POST", `/v1/sandboxes/${src}/checkpoints`, {});
    expect(ck.status, JSON.stringify(ck.body)).toBe(201);
    const ckId = ck.body.id as string;
    const durable = await until(
      ckId,
      async () => (await api("GET", `/v1/checkpoints/${ckId}`)).body as { state: string },
      (c) => c.state === "DURABLE" || c.state === "FAILED",
      { ms: 180_000 },
    );
    expect(durable.state, JSON.stringify(durable)).toBe("DURABLE");
    const fork = await api("POST", `/v1/sandboxes/${src}/fork`, { host: "w2" });
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    const child = fork.body.id as string;
    expect((await settled(child)).status).toBe("RUNNING");
    expect((await placements([child])).get(child)).toBe("w2");
    expect((await api("POST", `/v1/sandboxes/${child}/exec`, { command: "cat /keep" })).body.stdout).toBe("from-w1\n");
    const listed = (await api("GET", "/v1/sandboxes?status=RUNNING&limit=1000")).body.sandboxes as Sb[];
    const placed = await placements(listed.map((s) => s.id));
    const onW1 = listed.filter((s) => placed.get(s.id) === "w1").map((s) => s.id);
    const others = listed.filter((s) => placed.get(s.id) !== "w1").map((s) => s.id);
    expect(onW1).toContain(pinned.w1);
    expect(others).toEqual(expect.arrayContaining([pinned.w2, pinned.w3]));
    await stopChildProcess((workers[0] as Worker).proc, "SIGKILL");
    for (const id of onW1) {
      const s = await until(
        id,
        () => sandbox(id),
        (x) => ENDED.includes(x.status),
        { ms: 120_000 },
      );
      expect(s).toMatchObject({
        status: "ERROR",
        error_reason: expect.stringMatching(/^HOST_LOST: host w1 /),
        error_code: "HOST_LOST",
      });
    }
    expect((await hosts()).find((h) => h.name === "w1")).toMatchObject({ state: "LOST", usage: { placements: 0 } });
    for (const id of others) expect((await sandbox(id)).status, id).toBe("RUNNING");
    // w1 is gone; its checkpoint is in the bucket: it restores on another worker.
    const restored = await api("POST", "/v1/sandboxes", { checkpoint_id: ckId });
    expect(restored.status, JSON.stringify(restored.body)).toBe(201);
    const rid = restored.body.id as string;
    expect((await settled(rid)).status).toBe("RUNNING");
    expect(["w2", "w3"]).toContain((await placements([rid])).get(rid));
    expect((await api("POST", `/v1/sandboxes/${rid}/exec`, { command: "cat /keep" })).body.stdout).toBe("from-w1\n");
  }, 600_000);
});

// Fleet mode with two control planes on one PostgreSQL (no VM): the host registry is shared; a
// worker that stops heartbeating has its sandboxes marked ERROR `HOST_LOST` (once, whichever
// control plane reaps), their placements released and their billing closed; a control plane
// that starts (or restarts) on the shared database reconciles only its own host's sandboxes.
// Sandbox rows are written through a PgStore on the same database, as a third server would;
// time is a ManualClock: the bound is crossed by advancing it, never by waiting. A survivor ends the
// creates a lost control plane was starting on a worker (PeerTakeover).
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Sandbox } from "@sandtree/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock, PgStore, type RunningServer, startServer } from "../../src/index.js";
import { type Api, jsonApi } from "../helpers.js";
import { type PgServer, startPostgres } from "../postgres-server.js";
import { admitted, checkpointRow } from "../store/fixtures.js";

const BOUND_MS = 30_000;

describe("fleet on a shared PostgreSQL", () => {
  let db: PgServer;
  let url: string;
  let store: PgStore;
  const dirs: string[] = [];
  const servers: RunningServer[] = [];
  const clock = new ManualClock(Date.parse("2026-06-01T00:00:00Z"));
  let adminKey = "";
  const api = (s: RunningServer, token = adminKey): Api => jsonApi(s.url, () => token);

  /** A control plane on the shared database; a new one gets the first one's keys, as every replica must. */
  async function start(dataDir?: string): Promise<RunningServer> {
    const dir = dataDir ?? mkdtempSync(path.join(tmpdir(), "sandtree-fleet-pg-"));
    if (!dataDir) {
      if (dirs[0]) for (const f of ["server.key", "join-token"]) copyFileSync(path.join(dirs[0], f), path.join(dir, f));
      dirs.push(dir);
    }
    const s = await startServer(
      { dataDir: dir, database: url, host: "127.0.0.1", port: 0, logger: false, network: "off", hostLostAfterMs: BOUND_MS },
      { fleetClock: clock },
    );
    servers.push(s);
    return s;
  }

  /** A RUNNING sandbox row of the default team, written as another server would. */
  async function runningSandbox(over: Partial<Sandbox> = {}): Promise<string> {
    const team = await store.getTeamByName("default");
    const sandbox = await admitted(store, team?.id ?? "", over);
    await store.updateSandbox(sandbox.id, { status: "PROVISIONING" }, ["PENDING"]);
    await store.updateSandbox(sandbox.id, { status: "RUNNING", started_at: new Date().toISOString() }, ["PROVISIONING"]);
    return sandbox.id;
  }

  beforeAll(async () => {
    db = await startPostgres();
    url = await db.createDatabase("fleet");
    const a = await start();
    adminKey = a.firstKey ?? "";
    await start();
    store = await PgStore.open(url, { poolSize: 2 });
  });
  afterAll(async () => {
    for (const s of servers) await s.close().catch(() => {});
    await store?.close();
    await db?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("a control plane whose server.key or join token differs from the database's is refused at start (KEY_MISMATCH)", async () => {
    for (const [file, content] of [
      ["server.key", Buffer.alloc(32, 7)],
      ["join-token", `stj_${"x".repeat(40)}\n`],
    ] as const) {
      const dir = mkdtempSync(path.join(tmpdir(), "sandtree-fleet-pg-"));
      dirs.push(dir);
      for (const f of ["server.key", "join-token"]) copyFileSync(path.join(dirs[0] ?? "", f), path.join(dir, f));
      writeFileSync(path.join(dir, file), content, { mode: 0o600 });
      const err = await startServer({
        dataDir: dir,
        database: url,
        host: "127.0.0.1",
        port: 0,
        logger: false,
        network: "off",
      }).then(
        async (s) => {
          await s.close();
          return null;
        },
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ code: "KEY_MISMATCH", details: { file } });
      expect(String((err as Error).message)).not.toContain(
        typeof content === "string" ? content.trim() : content.toString("hex"),
      );
    }
  });

  it("both control planes list one registry: each its own local-<id> host, and a worker joined at either", async () => {
    const [a, b] = servers as [RunningServer, RunningServer];
    const names = [0, 1].map((i) => readFileSync(path.join(dirs[i] ?? "", "local-host-name"), "utf8").trim());
    expect(names[0]).toMatch(/^local-[0-9a-f]{12}$/);
    expect(names[1]).not.toBe(names[0]);
    const joined = await jsonApi(a.url, () => a.services.fleet.joinToken)("POST", "/v1/fleet/hosts/register", {
      name: "w-shared",
      capacity: { vcpus: 4, memory_mib: 4096, disk_gib: 10, accel: "tcg" },
    });
    expect(joined.status).toBe(201);
    const listed = (await api(b)("GET", "/v1/hosts")).body.hosts as Array<{ name: string }>;
    expect(listed.map((h) => h.name).sort()).toEqual([...names, "w-shared"].sort());
    const reserved = await jsonApi(b.url, () => b.services.fleet.joinToken)("POST", "/v1/fleet/hosts/register", {
      name: "local-mine",
      capacity: { vcpus: 1, memory_mib: 1, disk_gib: 1, accel: "tcg" },
    });
    expect([reserved.status, reserved.body.code]).toEqual([409, "ALREADY_EXISTS"]);
  });

  it("a silent worker's sandboxes become ERROR HOST_LOST once, placements released, billing closed", async () => {
    const [a, b] = servers as [RunningServer, RunningServer];
    const joined = await jsonApi(a.url, () => a.services.fleet.joinToken)("POST", "/v1/fleet/hosts/register", {
      name: "w-lost",
      capacity: { vcpus: 8, memory_mib: 8192, disk_gib: 100, accel: "tcg" },
    });
    expect(joined.status).toBe(201);
    const ids = [await runningSandbox(), await runningSandbox()];
    for (const id of ids) {
      const placed = await api(b)("POST", "/v1/fleet/placements", {
        sandbox_id: id,
        vcpus: 1,
        memory_mib: 1024,
        disk_gib: 1,
        host: "w-lost",
      });
      expect(placed.status, JSON.stringify(placed.body)).toBe(201);
    }
    // Every other host beats; w-lost does not. Both control planes reap at once.
    clock.advance(BOUND_MS + 1000);
    const reaped = await Promise.all([a.services.fleet.reap(), b.services.fleet.reap()]);
    const lost = reaped.flat().filter((l) => l.host.name === "w-lost");
    expect(lost).toHaveLength(1);
    expect(lost[0]?.sandboxIds.sort()).toEqual([...ids].sort());
    for (const id of ids) {
      const sb = await store.getSandbox(id);
      expect(sb?.status).toBe("ERROR");
      expect(sb?.error_reason).toMatch(/^HOST_LOST: host w-lost sent no heartbeat since /);
      expect(sb?.error_code).toBe("HOST_LOST");
      const shown = await api(a)("GET", `/v1/sandboxes/${id}`);
      expect([shown.body.status, shown.body.error_reason]).toEqual(["ERROR", sb?.error_reason]);
      const records = await store.meterRecordsOf("sandbox", [id]);
      expect(records.length).toBeGreaterThan(0);
      for (const r of records) expect(r.end_ms).not.toBeNull();
    }
    const hosts = (await api(a)("GET", "/v1/hosts")).body.hosts as Array<{ name: string; state: string; usage: object }>;
    expect(hosts.find((h) => h.name === "w-lost")).toMatchObject({ state: "LOST", usage: { placements: 0, vcpus: 0 } });
    // Reaping again, anywhere, changes nothing.
    expect((await b.services.fleet.reap()).filter((l) => l.host.name === "w-lost")).toEqual([]);
    const events = await store.listEvents(ids[0] ?? "", 100);
    expect(events.filter((e) => e.message.includes("HOST_LOST"))).toHaveLength(1);
  });

  it("the timeout sweep of one control plane leaves a peer's own sandboxes alone", async () => {
    const [a, b] = servers as [RunningServer, RunningServer];
    // An idle-timed sandbox on A's own host, and one on a worker: both idle past their timeout
    // at the sweep's `now` (an hour ahead).
    const mine = await runningSandbox({ idle_timeout_minutes: 1 });
    const sb = await store.getSandbox(mine);
    if (sb) await a.services.fleet.placeLocal(sb);
    const onWorker = await runningSandbox({ idle_timeout_minutes: 1 });
    const joined = await jsonApi(b.url, () => b.services.fleet.joinToken)("POST", "/v1/fleet/hosts/register", {
      name: "w-idle",
      capacity: { vcpus: 4, memory_mib: 4096, disk_gib: 10, accel: "tcg" },
    });
    expect(joined.status).toBe(201);
    const placed = await api(b)("POST", "/v1/fleet/placements", {
      sandbox_id: onWorker,
      vcpus: 1,
      memory_mib: 1024,
      disk_gib: 1,
      host: "w-idle",
    });
    expect(placed.status, JSON.stringify(placed.body)).toBe(201);
    // What each server leaves to its peers (its timeout sweep, and its network start by the same
    // rule): A's sandbox is B's peer's; the worker's sandbox is nobody's peer's.
    const peersOfB = await b.services.fleet.peerPlacements();
    const peersOfA = await a.services.fleet.peerPlacements();
    expect([peersOfB.has(mine), peersOfB.has(onWorker), peersOfA.has(mine), peersOfA.has(onWorker)]).toEqual([
      true,
      false,
      false,
      false,
    ]);
    const later = Date.now() + 3_600_000;
    // B never times out A's sandbox; a worker's sandbox is any control plane's to time out.
    const byB = await b.services.timeouts.sweep(later);
    expect(byB).not.toContain(mine);
    expect(byB).toContain(onWorker);
    await b.services.timeouts.stop();
    expect((await store.getSandbox(mine))?.status).toBe("RUNNING");
    expect((await store.getSandbox(onWorker))?.status).toBe("TIMEOUT");
    // A does.
    expect(await a.services.timeouts.sweep(later)).toContain(mine);
    await a.services.timeouts.stop();
    expect((await store.getSandbox(mine))?.status).toBe("TIMEOUT");
    // Its placement goes back (A follows its own status changes in the background).
    await expect.poll(() => a.services.fleet.placedOn(mine)).toBeNull();
  });

  it("a control plane starting on the shared database leaves other hosts' sandboxes and checkpoints alone; its own restart reconciles its own", async () => {
    const a = servers[0] as RunningServer;
    // A's sandbox: placed on A's own host, as A's create path records it.
    const mine = await runningSandbox();
    const sb = await store.getSandbox(mine);
    if (sb) await a.services.fleet.placeLocal(sb);
    const aName = readFileSync(path.join(dirs[0] ?? "", "local-host-name"), "utf8").trim();
    const hosts = (await api(a)("GET", "/v1/hosts")).body.hosts as Array<{ name: string; usage: { placements: number } }>;
    expect(hosts.find((h) => h.name === aName)?.usage.placements).toBe(1);
    // A checkpoint of it in progress (A is taking it).
    const ck = checkpointRow(sb?.team_id ?? "", mine);
    await store.insertCheckpoint(ck);
    // A third control plane starts: with its own store's rules it would mark a RUNNING sandbox
    // without a VM here ERROR; on the shared database it is not its own.
    await start();
    expect((await store.getSandbox(mine))?.status).toBe("RUNNING");
    expect((await store.getCheckpoint(ck.id))?.state).toBe("PENDING");
    // A restarts on its data dir: the sandbox is placed on its own host and its VM is gone.
    await a.close();
    servers.shift();
    const again = await start(dirs[0]);
    await expect.poll(async () => (await store.getSandbox(mine))?.status).toBe("ERROR");
    expect((await store.getSandbox(mine))?.error_reason).toContain("VM was gone");
    expect(await store.getCheckpoint(ck.id)).toMatchObject({ state: "FAILED", error: expect.stringContaining("restarted") });
    expect(readFileSync(path.join(dirs[0] ?? "", "local-host-name"), "utf8").trim()).toBe(aName);
    await again.services.fleet.reap();
  });

  it("creates a lost control plane was starting on a worker are ended by a survivor; never-admitted placements released", async () => {
    const b = servers[servers.length - 1] as RunningServer;
    const c = await start();
    const joined = await jsonApi(c.url, () => c.services.fleet.joinToken)("POST", "/v1/fleet/hosts/register", {
      name: "w-strand",
      capacity: { vcpus: 8, memory_mib: 8192, disk_gib: 100, accel: "tcg" },
    });
    expect(joined.status).toBe(201);
    const team = await store.getTeamByName("default");
    const ask = (id: string) => ({ sandbox_id: id, vcpus: 1, memory_mib: 1024, disk_gib: 1, layers: [], host: "w-strand" });
    // C admitted one create and placed it on the worker (as its create path does), placed another
    // it never admitted, and has a RUNNING one there; an admin's bare reservation has no starter.
    const starting = await admitted(store, team?.id ?? "");
    await c.services.fleet.placeSandbox(ask(starting.id), undefined, { startsHere: true });
    await c.services.fleet.placeSandbox(ask("sb-neveradmitted"), undefined, { startsHere: true });
    const running = await runningSandbox();
    await c.services.fleet.placeSandbox(ask(running), undefined, { startsHere: true });
    expect((await api(b)("POST", "/v1/fleet/placements", ask("sb-adminreserved"))).status).toBe(201);
    // Nothing is stranded while C lives.
    expect((await b.services.fleet.strandedStarts()).map((s) => s.sandbox_id)).toEqual([]);
    // C stops; the bound passes; the worker beats on; B reaps and sweeps.
    await c.close();
    clock.advance(BOUND_MS + 1000);
    const secret = joined.body.secret as string;
    const beat = await jsonApi(b.url, () => secret)("POST", `/v1/fleet/hosts/${joined.body.host_id}/heartbeat`, {});
    expect(beat.status).toBe(200);
    await b.services.fleet.reap();
    await expect.poll(async () => (await store.getSandbox(starting.id))?.status).toBe("ERROR");
    const cName = readFileSync(path.join(dirs[dirs.length - 1] ?? "", "local-host-name"), "utf8").trim();
    expect((await store.getSandbox(starting.id))?.error_reason).toBe(
      `HOST_LOST: control plane ${cName}, which was starting it on host w-strand, stopped (the host runs no sandboxes)`,
    );
    await expect.poll(() => b.services.fleet.placedOn("sb-neveradmitted")).toBeNull();
    expect(await b.services.fleet.placedOn(starting.id)).toBeNull();
    // Untouched: the RUNNING sandbox and its placement, the admin's reservation.
    expect((await store.getSandbox(running))?.status).toBe("RUNNING");
    expect(await b.services.fleet.placedOn(running)).toBe(joined.body.host_id);
    expect(await b.services.fleet.placedOn("sb-adminreserved")).toBe(joined.body.host_id);
  });
});

// Metering across a `kill -9` of the server (#15): the server runs as a child process (the built
// CLI's `serve`), is killed with SIGKILL while sandboxes run and one is paused, and one VM dies
// while the server is down. After the restart every meter record written before the crash is
// there, the adopted sandboxes' spans go on in the same record (billed through the downtime
// once), the lost one's span ends when the restarted server finds it gone, no two spans of a
// sandbox overlap, and the usage API bills exactly the records. Needs `npm run build`.
import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonApi, killQemusOf, qemuPidsFor, spawnServe, stopChildProcess } from "./helpers.js";

const BODY = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let dataDir = "";
let runRoot = "";
let child: ChildProcess | null = null;
let output = "";
let url = "";
let key = "";
const created: string[] = [];

async function startChild(): Promise<void> {
  output = "";
  const s = await spawnServe(dataDir, { onOutput: (d) => (output += d) });
  child = s.proc;
  url = s.url;
  key ||= s.key;
}

async function stopChild(signal: NodeJS.Signals): Promise<void> {
  const proc = child;
  child = null;
  await stopChildProcess(proc, signal);
}

/** The API of the server running now (its URL and key change with each start). */
const api = (method: string, p: string, body?: unknown) => jsonApi(url, () => key)(method, p, body);

async function waitStatus(id: string, want: string): Promise<void> {
  const deadline = Date.now() + 240_000;
  for (;;) {
    const sb = (await api("GET", `/v1/sandboxes/${id}`)).body;
    if (sb.status === want) return;
    if (Date.now() > deadline) throw new Error(`${id} still ${sb.status}, not ${want}`);
    await sleep(50);
  }
}

interface Rec {
  id: number;
  state: string;
  vcpus: number;
  start_ms: number;
  end_ms: number | null;
}

/** The sandbox's meter records straight from the database, oldest first. */
function records(id: string): Rec[] {
  const db = new Database(path.join(dataDir, "sandtree.db"), { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare("SELECT id, state, vcpus, start_ms, end_ms FROM meter_records WHERE subject_id = ? ORDER BY start_ms, id")
      .all(id) as Rec[];
  } finally {
    db.close();
  }
}

function assertNoOverlap(rs: Rec[]): void {
  for (let i = 1; i < rs.length; i++) {
    const prev = rs[i - 1] as Rec;
    expect(prev.end_ms, `record ${prev.id} is closed`).not.toBeNull();
    expect(prev.end_ms as number).toBeLessThanOrEqual((rs[i] as Rec).start_ms);
  }
}

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), "sandtree-metering-crash-"));
  runRoot = path.join(tmpdir(), `sandtree-${createHash("sha256").update(path.resolve(dataDir)).digest("hex").slice(0, 10)}`);
  await startChild();
});

afterAll(async () => {
  await stopChild("SIGKILL");
  killQemusOf(runRoot, created);
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  if (runRoot) rmSync(runRoot, { recursive: true, force: true });
});

describe("metering survives kill -9 of the server", () => {
  it("loses no record, bills the downtime once, and closes a lost sandbox's span at the restart", {
    timeout: 600_000,
  }, async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await api("POST", "/v1/sandboxes", BODY);
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      ids.push(r.body.id);
      created.push(r.body.id);
    }
    const [running, lost, paused] = ids as [string, string, string];
    for (const id of ids) await waitStatus(id, "RUNNING");
    expect((await api("POST", `/v1/sandboxes/${paused}/pause`)).body.status).toBe("PAUSED");

    const beforeKill = Date.now();
    await stopChild("SIGKILL");
    // While the server is dead one VM dies too: the restarted server finds it gone.
    for (const line of qemuPidsFor([lost])) process.kill(Number.parseInt(line, 10), "SIGKILL");
    const beforeRecords = new Map(ids.map((id) => [id, records(id)]));
    await sleep(1500);
    const restartedAt = Date.now();
    await startChild();
    await waitStatus(lost, "ERROR");
    const lostSeenAt = Date.now();
    // Calls into the adopted VMs wait for their adoption.
    expect((await api("POST", `/v1/sandboxes/${running}/exec`, { command: "true" })).body.exit_code).toBe(0);
    expect((await api("POST", `/v1/sandboxes/${paused}/resume`)).body.status).toBe("RUNNING");
    for (const id of [running, paused]) expect((await api("DELETE", `/v1/sandboxes/${id}`)).body.status).toBe("TERMINATED");
    // A clean stop after the deletes changes nothing more.
    await stopChild("SIGTERM");

    // Nothing written before the crash is gone or rewritten (only closed).
    for (const id of ids) {
      const now = records(id);
      for (const r of beforeRecords.get(id) ?? []) {
        const same = now.find((x) => x.id === r.id);
        expect(same, `record ${r.id} of ${id}`).toBeDefined();
        expect(same?.start_ms).toBe(r.start_ms);
        if (r.end_ms !== null) expect(same?.end_ms).toBe(r.end_ms);
      }
      assertNoOverlap(now);
      for (const r of now) expect(r.end_ms, `record ${r.id} of ${id} closed`).not.toBeNull();
    }

    // The adopted running sandbox: one RUNNING span from before the crash to its delete.
    const a = records(running);
    expect(a.map((r) => r.state)).toEqual(["RUNNING"]);
    expect(a[0]?.start_ms).toBeLessThan(beforeKill);
    expect(a[0]?.end_ms).toBeGreaterThan(restartedAt);

    // The lost one: its span ends when the restarted server found its VM gone, not before the crash.
    const b = records(lost);
    expect(b.map((r) => r.state)).toEqual(["RUNNING"]);
    expect(b[0]?.end_ms).toBeGreaterThanOrEqual(restartedAt);
    expect(b[0]?.end_ms).toBeLessThanOrEqual(lostSeenAt);

    // The paused one: RUNNING until the pause, PAUSED across the crash, RUNNING again after the resume.
    const c = records(paused);
    expect(c.map((r) => r.state)).toEqual(["RUNNING", "PAUSED", "RUNNING"]);
    expect(c[1]?.start_ms).toBeLessThan(beforeKill);
    expect(c[1]?.end_ms).toBeGreaterThan(restartedAt);

    // The usage API bills exactly these records, each second once.
    await startChild();
    const usage = await api("GET", "/v1/usage?group_by=sandbox&from=2000-01-01T00:00:00Z");
    expect(usage.status).toBe(200);
    for (const id of ids) {
      const line = usage.body.lines.find((l: any) => l.key === id);
      const expected = records(id).reduce((s, r) => s + (r.vcpus * ((r.end_ms as number) - r.start_ms)) / 1000, 0);
      expect(Math.abs(line.vcpu_seconds - expected), id).toBeLessThan(1e-6);
      const sb = (await api("GET", `/v1/sandboxes/${id}`)).body;
      expect(Math.abs(sb.cost_usd - line.cost_usd), id).toBeLessThan(1e-12);
    }
    await stopChild("SIGTERM");
  });
});

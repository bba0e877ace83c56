// A server on PostgreSQL end to end: the services run unchanged on PgStore. One small VM: create,
// exec, a job, checkpoint, fork, delete through the API of a server started with `database` set to a
// database of a real PostgreSQL this file starts (postgres-server.ts), then the rows and meter
// records read straight from PostgreSQL, and no SQLite file in the data dir.
import { existsSync } from "node:fs";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";
import { type PgServer, startPostgres } from "./postgres-server.js";

let db: PgServer;
let url: string;
let t: TestServer;

beforeAll(async () => {
  db = await startPostgres();
  url = await db.createDatabase("server_e2e");
  t = await startTestServer({ database: url });
});
afterAll(async () => {
  await t?.close();
  await db?.stop();
});

async function sql<T>(text: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text, params)).rows as T[];
  } finally {
    await c.end();
  }
}

async function exec(id: string, command: string): Promise<string> {
  const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(r.body.exit_code, r.body.stderr).toBe(0);
  return r.body.stdout as string;
}

async function waitStatus(id: string, status: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if ((await t.api("GET", `/v1/sandboxes/${id}`)).body.status === status) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`sandbox ${id} never became ${status}`);
}

describe("a server on PostgreSQL", () => {
  it("creates, runs, checkpoints, forks and deletes sandboxes, keeping every row in PostgreSQL", async () => {
    expect(existsSync(path.join(t.dataDir, "sandtree.db"))).toBe(false);
    const created = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", disk_size_gb: 1, memory_gb: 0.25 });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const parent = created.body.id as string;
    await t.waitRunning(parent);
    expect(await exec(parent, "echo from-parent > /data.txt && cat /data.txt")).toBe("from-parent\n");

    // A job's tails are kept in its row; PostgreSQL's text takes no NUL, so one is kept as U+FFFD.
    const job = await t.api("POST", `/v1/sandboxes/${parent}/jobs`, { command: "printf 'a\\000b\\n'" });
    expect(job.status, JSON.stringify(job.body)).toBe(201);
    const jobUrl = `/v1/sandboxes/${parent}/jobs/${job.body.job_id}`;
    await expect.poll(async () => (await t.api("GET", jobUrl)).body.status, { timeout: 60_000 }).toBe("EXITED");
    expect((await t.api("GET", jobUrl)).body).toMatchObject({ stdout_tail: "a\0b\n", stdout_bytes: 4 });
    const kept = await sql<{ stdout_tail: string }>("SELECT stdout_tail FROM jobs WHERE id = $1", [job.body.job_id]);
    expect(kept).toEqual([{ stdout_tail: "a\uFFFDb\n" }]);

    // A filesystem fork: checkpoint and a child booted from it, which sees the file.
    const forked = await t.api("POST", `/v1/sandboxes/${parent}/fork`, { memory_gb: 0.25 });
    expect(forked.status, JSON.stringify(forked.body)).toBe(201);
    const child = forked.body.id as string;
    await t.waitRunning(child);
    expect(await exec(child, "cat /data.txt")).toBe("from-parent\n");
    const checkpointId = forked.body.source_checkpoint_id as string;
    // The child starts once the checkpoint is FROZEN; the seal ends behind it.
    await expect
      .poll(async () => (await t.api("GET", `/v1/checkpoints/${checkpointId}`)).body.state, { timeout: 120_000 })
      .toBe("DURABLE");

    for (const id of [child, parent]) {
      expect((await t.api("DELETE", `/v1/sandboxes/${id}`)).status).toBeLessThan(300);
      await waitStatus(id, "TERMINATED");
    }

    // The state is PostgreSQL's: both sandboxes, the checkpoint, and each sandbox's RUNNING
    // interval metered and closed by its delete.
    const rows = await sql<{ id: string; status: string }>("SELECT id, status FROM sandboxes WHERE id = ANY($1) ORDER BY id", [
      [parent, child],
    ]);
    expect(rows).toEqual([parent, child].sort().map((id) => ({ id, status: "TERMINATED" })));
    const ck = await sql<{ state: string; sandbox_id: string }>("SELECT state, sandbox_id FROM checkpoints WHERE id = $1", [
      checkpointId,
    ]);
    expect(ck).toEqual([{ state: "DURABLE", sandbox_id: parent }]);
    const meters = await sql<{ subject_id: string; state: string; end_ms: string | null }>(
      "SELECT subject_id, state, end_ms FROM meter_records WHERE kind = 'sandbox' AND subject_id = ANY($1)",
      [[parent, child]],
    );
    for (const id of [parent, child]) {
      const running = meters.filter((m) => m.subject_id === id && m.state === "RUNNING");
      expect(running.length).toBeGreaterThan(0);
      for (const m of running) expect(m.end_ms).not.toBeNull();
    }
    expect(existsSync(path.join(t.dataDir, "sandtree.db"))).toBe(false);
  });
});

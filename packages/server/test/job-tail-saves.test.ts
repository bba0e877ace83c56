// How often a job's output tails are written to its row, on the fake host (no VM): a client
// polling a running job does not rewrite the row on every read, and the tails read last survive
// the job's end, its sandbox's deletion (even when the guest lost its files) and a crash of its
// machine. The fake host's shell cannot run the job launcher, so each job's row is inserted as
// the job service inserts one at a start, and its output files are written into the fake guest.
import { randomBytes } from "node:crypto";
import { describe, expect, it, vi } from "vitest";
import { TAIL_SAVE_INTERVAL_MS } from "../src/services/commands/job-tail-saver.js";
import { machineNameOf } from "../src/services/sandboxes/sandbox-paths.js";
import { onFakeHost, running } from "./fake-host-life.js";
import type { TestServer } from "./helpers.js";
import { jobRow } from "./store/fixtures.js";

let t: TestServer;
const host = onFakeHost({ digestChar: "c", started: (server) => void (t = server) });

async function sandbox(): Promise<{ id: string; teamId: string }> {
  const r = await t.api("POST", "/v1/sandboxes", { image: "fake/image" });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  await running(t, r.body.id);
  return { id: r.body.id, teamId: r.body.team_id };
}

async function insertJob(sb: { id: string; teamId: string }): Promise<{ jobId: string; dir: string; url: string }> {
  const jobId = `job-${randomBytes(8).toString("hex")}`;
  const row = jobRow(sb.teamId, sb.id, {
    id: jobId,
    command: "chatty",
    wrapper_pid: null,
    started_at: new Date().toISOString(),
  });
  await t.server.store.insertJob(row);
  return { jobId, dir: `/run/sandtree/jobs/${jobId}`, url: `/v1/sandboxes/${sb.id}/jobs/${jobId}` };
}

function guest(id: string) {
  const m = host.machines.get(machineNameOf(id));
  if (!m) throw new Error(`no fake machine ${id}`);
  return m.files;
}

/** Counts the store's writes of a job's tails (the store is the seam a deployment swaps). */
function countTailWrites(jobId: string): { count: () => number; restore: () => void } {
  const spy = vi.spyOn(t.server.store, "updateJob");
  return {
    count: () => spy.mock.calls.filter(([id, patch]) => id === jobId && "stdout_tail" in patch).length,
    restore: () => spy.mockRestore(),
  };
}

describe("job output tails in the store", () => {
  it("writes a polled job's tails at most once per interval, and all of them at its end and its sandbox's deletion", async () => {
    const sb = await sandbox();
    const files = guest(sb.id);
    const polled = await insertJob(sb);
    const writes = countTailWrites(polled.jobId);
    let text = "";
    const READS = 10;
    const t0 = Date.now();
    try {
      for (let i = 1; i <= READS; i++) {
        text += `line ${i}\n`;
        files.write(`${polled.dir}/stdout`, Buffer.from(`line ${i}\n`), true);
        const r = await t.api("GET", polled.url);
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        // Each read answers with what the guest holds now, written or not.
        expect(r.body).toMatchObject({ status: "RUNNING", stdout_tail: text, stdout_bytes: text.length });
      }
      const elapsed = Date.now() - t0;
      console.log(JSON.stringify({ reads: READS, tail_writes: writes.count(), elapsed_ms: elapsed }));
      // The first read writes (the row was never read before), then one write per interval at most.
      expect(writes.count()).toBeLessThanOrEqual(1 + Math.floor(elapsed / TAIL_SAVE_INTERVAL_MS));
      expect(writes.count()).toBeGreaterThanOrEqual(1);
    } finally {
      writes.restore();
    }

    // A job that ends: its final tails are in its row at once.
    const ending = await insertJob(sb);
    files.write(`${ending.dir}/stdout`, Buffer.from("first\n"), false);
    expect((await t.api("GET", ending.url)).body.stdout_tail).toBe("first\n");
    files.write(`${ending.dir}/stdout`, Buffer.from("done\n"), true);
    files.write(`${ending.dir}/exit`, Buffer.from("0\n"), false);
    expect((await t.api("GET", ending.url)).body).toMatchObject({ status: "EXITED", exit_code: 0, stdout_tail: "first\ndone\n" });
    expect(await t.server.store.getJob(sb.teamId, sb.id, ending.jobId)).toMatchObject({
      status: "EXITED",
      stdout_tail: "first\ndone\n",
      stdout_bytes: 11,
    });

    // The guest loses the polled job's files, then the sandbox is deleted: the tails read last stay.
    files.remove(polled.dir, true);
    expect((await t.api("DELETE", `/v1/sandboxes/${sb.id}`)).status).toBe(200);
    const after = await t.api("GET", polled.url);
    expect(after.body).toMatchObject({ status: "KILLED", stdout_tail: text, stdout_bytes: text.length });
    expect(after.body.error_reason).toContain("TERMINATED");
    expect(await t.server.store.getJob(sb.teamId, sb.id, polled.jobId)).toMatchObject({ stdout_tail: text });
  });

  it("keeps the tails read last of a job whose machine crashed", async () => {
    const sb = await sandbox();
    const files = guest(sb.id);
    const job = await insertJob(sb);
    files.write(`${job.dir}/stderr`, Buffer.from("one\n"), false);
    expect((await t.api("GET", job.url)).body.stderr_tail).toBe("one\n");
    files.write(`${job.dir}/stderr`, Buffer.from("two\n"), true);
    expect((await t.api("GET", job.url)).body.stderr_tail).toBe("one\ntwo\n");
    host.machines.get(machineNameOf(sb.id))?.forceKill();
    for (let i = 0; (await t.api("GET", `/v1/sandboxes/${sb.id}`)).body.status !== "ERROR"; i++) {
      if (i > 500) throw new Error("the sandbox did not end in ERROR");
      await new Promise((res) => setTimeout(res, 20));
    }
    const after = await t.api("GET", job.url);
    expect(after.body).toMatchObject({ status: "KILLED", stderr_tail: "one\ntwo\n", stderr_bytes: 8 });
    expect(await t.server.store.getJob(sb.teamId, sb.id, job.jobId)).toMatchObject({ stderr_tail: "one\ntwo\n" });
    await t.api("DELETE", `/v1/sandboxes/${sb.id}`);
  });
});

import { describe, expect, it } from "vitest";
import { cpuTicks, qemuPidsFor, serverForFile } from "./helpers.js";

const t = serverForFile();

const run = async (id: string, command: string) => (await t.api("POST", `/v1/sandboxes/${id}/exec`, { command })).body;
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

/** The guest counter's value (written whole by a rename, so a read never sees it half-written). */
async function count(id: string): Promise<number> {
  const out = (await run(id, "cat /tmp/count")).stdout as string;
  expect(out).toMatch(/^\d+\n$/);
  return Number(out);
}

/** Polls until the counter passes `above` and returns it: the guest is running and counting. */
async function countPast(id: string, above: number): Promise<number> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const c = await count(id).catch(() => undefined);
    if (c !== undefined && c > above) return c;
    if (Date.now() > deadline) throw new Error(`guest counter never passed ${above} (last ${c})`);
    await sleep(200);
  }
}

// One increment per 0.2 s of guest time at most: while paused it cannot move.
const TICK_MS = 200;

describe("pause and resume", () => {
  it("keeps memory and processes, uses no CPU while paused, and fixes the clock on resume", { timeout: 300_000 }, async () => {
    const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    const id = r.body.id as string;
    await t.waitRunning(id);
    // A process that counts in memory and records its count.
    await t.api("POST", `/v1/sandboxes/${id}/jobs`, {
      command: "i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.2; done",
    });
    await countPast(id, 2);

    // The guest runs only between these host timestamps: [t0, t1] before the pause took, [t2, t3] after resume.
    const t0 = Date.now();
    const before = await count(id);
    const paused = await t.api("POST", `/v1/sandboxes/${id}/pause`);
    const t1 = Date.now();
    expect(paused.status).toBe(200);
    expect(paused.body.status).toBe("PAUSED");
    const exec = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "true" });
    expect(exec.status).toBe(409);
    expect((await t.api("POST", `/v1/sandboxes/${id}/pause`)).status).toBe(409);

    const pid = Number.parseInt(qemuPidsFor([id])[0] ?? "", 10);
    const ticks = cpuTicks(pid);
    await sleep(3000);
    // CPU time, not wall time: under TCG a stopped VM's QEMU does almost nothing (its idle
    // threads may tick a little), while this guest running its loop would burn far more.
    expect(cpuTicks(pid) - ticks).toBeLessThan(15);

    const t2 = Date.now();
    const resumed = await t.api("POST", `/v1/sandboxes/${id}/resume`);
    expect(resumed.body.status).toBe("RUNNING");
    const after = await count(id);
    const t3 = Date.now();
    // The counter went on from where it was (not restarted at 1) and did not move while paused:
    // it can have counted only in the running windows, not in the 3 s (15 ticks) between them.
    expect(after).toBeGreaterThanOrEqual(before);
    expect(after - before).toBeLessThanOrEqual(Math.ceil((t1 - t0 + (t3 - t2)) / TICK_MS) + 2);
    await countPast(id, after);

    // The guest's clock, bracketed by the host's around the exec (its latency under load is not
    // the guest's error); a clock not fixed on resume would lag by the 3 s pause.
    const hostBefore = Date.now() / 1000;
    const guestNow = Number((await run(id, "date +%s")).stdout.trim());
    const hostAfter = Date.now() / 1000;
    expect(guestNow).toBeGreaterThanOrEqual(Math.floor(hostBefore) - 1);
    expect(guestNow).toBeLessThanOrEqual(Math.ceil(hostAfter) + 1);
    expect((await t.api("POST", `/v1/sandboxes/${id}/resume`)).status).toBe(409);

    // A paused sandbox deletes cleanly.
    await t.api("POST", `/v1/sandboxes/${id}/pause`);
    const del = await t.api("DELETE", `/v1/sandboxes/${id}`);
    expect(del.body.status).toBe("TERMINATED");
    expect(qemuPidsFor([id])).toEqual([]);
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cpuTicks, qemuPidsFor, startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.close();
});

const run = async (id: string, command: string) => (await t.api("POST", `/v1/sandboxes/${id}/exec`, { command })).body;

describe("pause and resume", () => {
  it("keeps memory and processes, uses no CPU while paused, and fixes the clock on resume", { timeout: 300_000 }, async () => {
    const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    const id = r.body.id as string;
    await t.waitRunning(id);
    // A process that counts in memory and records its count.
    await t.api("POST", `/v1/sandboxes/${id}/jobs`, {
      command: "i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.2; done",
    });
    await new Promise((res) => setTimeout(res, 1500));
    const paused = await t.api("POST", `/v1/sandboxes/${id}/pause`);
    expect(paused.status).toBe(200);
    expect(paused.body.status).toBe("PAUSED");
    const exec = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "true" });
    expect(exec.status).toBe(409);
    expect((await t.api("POST", `/v1/sandboxes/${id}/pause`)).status).toBe(409);

    const pid = Number.parseInt(qemuPidsFor([id])[0] ?? "", 10);
    const before = cpuTicks(pid);
    await new Promise((res) => setTimeout(res, 3000));
    // Under TCG a stopped VM's QEMU does almost nothing (its idle threads may tick a little).
    expect(cpuTicks(pid) - before).toBeLessThan(15);

    const resumed = await t.api("POST", `/v1/sandboxes/${id}/resume`);
    expect(resumed.body.status).toBe("RUNNING");
    const c1 = Number((await run(id, "cat /tmp/count")).stdout);
    await new Promise((res) => setTimeout(res, 1500));
    const c2 = Number((await run(id, "cat /tmp/count")).stdout);
    expect(c1).toBeGreaterThan(2);
    expect(c2).toBeGreaterThan(c1);
    // The counter went on from where it was (it did not restart at 1).
    expect(c2 - c1).toBeLessThan(c1 + 20);
    const guestNow = Number((await run(id, "date +%s")).stdout.trim());
    expect(Math.abs(guestNow - Date.now() / 1000)).toBeLessThan(2);
    expect((await t.api("POST", `/v1/sandboxes/${id}/resume`)).status).toBe(409);

    // A paused sandbox deletes cleanly.
    await t.api("POST", `/v1/sandboxes/${id}/pause`);
    const del = await t.api("DELETE", `/v1/sandboxes/${id}`);
    expect(del.body.status).toBe("TERMINATED");
    expect(qemuPidsFor([id])).toEqual([]);
  });
});

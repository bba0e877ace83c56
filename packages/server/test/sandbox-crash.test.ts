import { describe, expect, it } from "vitest";
import { qemuPidsFor, serverForFile } from "./helpers.js";

const t = serverForFile();

describe("supervision", () => {
  it("marks a sandbox ERROR with the reason when its QEMU dies, keeps its console log, spares others", {
    timeout: 300_000,
  }, async () => {
    const [a, b] = await Promise.all([
      t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 }),
      t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", cpu_cores: 2, memory_gb: 0.375, disk_size_gb: 1 }),
    ]);
    await Promise.all([t.waitRunning(a!.body.id), t.waitRunning(b!.body.id)]);
    const victim = a!.body.id as string;
    const team = (await t.api("GET", "/v1/teams")).body.teams[0].name as string;
    const usage = async () => (await t.api("GET", `/v1/teams/${team}/limits`)).body.usage;
    const before = await usage();
    const line = qemuPidsFor([victim])[0] ?? "";
    const pid = Number.parseInt(line, 10);
    expect(pid).toBeGreaterThan(1);
    process.kill(pid, "SIGKILL");
    let sb: any;
    for (let i = 0; i < 100; i++) {
      sb = (await t.api("GET", `/v1/sandboxes/${victim}`)).body;
      if (sb.status !== "RUNNING") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(sb.status).toBe("ERROR");
    expect(sb.error_reason).toContain("SIGKILL");
    expect(sb.error_code).toBe("MACHINE_EXITED");
    // Its quota is released: one sandbox and its one vCPU fewer in use.
    const after = await usage();
    expect(after.active_sandboxes).toBe(before.active_sandboxes - 1);
    expect(after.vcpus).toBe(before.vcpus - 1);
    const logs = await t.api("GET", `/v1/sandboxes/${victim}/logs`);
    expect(logs.body.console.length).toBeGreaterThan(0);
    expect(logs.body.events.map((e: { message: string }) => e.message).join("\n")).toContain("error");
    const exec = await t.api("POST", `/v1/sandboxes/${victim}/exec`, { command: "true" });
    expect(exec.body.code).toBe("SANDBOX_NOT_RUNNING");
    // The survivor answers, with the CPUs and memory it asked for.
    const other = await t.api("POST", `/v1/sandboxes/${b!.body.id}/exec`, { command: "nproc; grep MemTotal /proc/meminfo" });
    const [nproc, mem] = other.body.stdout.split("\n");
    expect(nproc).toBe("2");
    const memKb = Number(/(\d+)/.exec(mem)?.[1]);
    expect(memKb).toBeGreaterThan(300 * 1024);
    expect(memKb).toBeLessThanOrEqual(384 * 1024);
    await t.api("DELETE", `/v1/sandboxes/${b!.body.id}`);
    expect(qemuPidsFor([victim, b!.body.id])).toEqual([]);
  });
});

// Runs the guest's own end-to-end test, boot-test.sh: the agent as PID 1 of a real microVM with a
// busybox root, driven by tools/agentctl.py (the debug client, not the host's AgentClient), and
// powered off by the agent itself: the host's stop falls back to QMP quit and SIGKILL, so the
// server's tests would not notice a SHUTDOWN that leaves QEMU running.
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SCRIPT = fileURLToPath(new URL("./boot-test.sh", import.meta.url));

function runScript(timeoutMs: number): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    // SIGTERM on timeout: the script's EXIT trap kills its QEMU and removes its files.
    const child = spawn("bash", [SCRIPT], { stdio: ["ignore", "pipe", "pipe"], signal: AbortSignal.timeout(timeoutMs) });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.on("error", (err) => (out += `\n${err.message}\n`));
    child.on("close", (code) => resolve({ code, out }));
  });
}

describe("guest agent in a real microVM (boot-test.sh)", () => {
  it("boots, answers every agentctl.py request right, and powers QEMU off by itself", { timeout: 300_000 }, async () => {
    const { code, out } = await runScript(280_000);
    expect(
      out.split("\n").filter((l) => l.startsWith("FAIL")),
      out,
    ).toEqual([]);
    expect(code, out).toBe(0);
    expect(out).toMatch(/^ok {3}PID 1 is the agent$/m);
    expect(out).toMatch(/^ok {3}shutdown exits QEMU$/m);
    expect(out).toContain("all checks passed");
  });
});

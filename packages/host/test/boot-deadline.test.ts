// The boot deadline does not count time a VM waited for a host CPU: a starved guest is slow, not
// hung. Deadline's allowance (fake timers: the logic, not the clock) and cpuWaitSince on real
// processes that compete for one CPU (no VM).
import { type ChildProcess, spawn } from "node:child_process";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Deadline, DeadlineError } from "../src/util/deadline.js";
import { cpuWaitSince } from "../src/vmm/cpu-wait.js";
import { startFailureSentence } from "../src/vmm/start-failure.js";

describe("Deadline with an allowance", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("moves out by the time that did not count, never past its cap", () => {
    vi.useFakeTimers();
    let waited = 0;
    const d = new Deadline(10_000, "the guest agent", undefined, { notCountedMs: () => waited, capMs: 20_000 });
    waited = 4000;
    vi.advanceTimersByTime(10_000);
    expect(d.signal.aborted).toBe(false);
    // No more waiting meanwhile: it ends 4 s after the plain deadline.
    vi.advanceTimersByTime(3999);
    expect(d.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(d.timedOut).toBe(true);
    expect(d.signal.reason).toBeInstanceOf(DeadlineError);
    expect(d.elapsedMs).toBe(14_000);
  });

  it("ends at the cap however long the work waited, and at once when nothing waited", () => {
    vi.useFakeTimers();
    const capped = new Deadline(10_000, "x", undefined, { notCountedMs: () => 60_000, capMs: 20_000 });
    const plain = new Deadline(10_000, "y", undefined, { notCountedMs: () => 0, capMs: 20_000 });
    vi.advanceTimersByTime(10_000);
    expect([capped.signal.aborted, plain.timedOut]).toEqual([false, true]);
    vi.advanceTimersByTime(10_000);
    expect(capped.timedOut).toBe(true);
    expect(startFailureSentence(true, false, capped.ms, capped.elapsedMs)).toBe(
      "the VM did not start: its guest did not answer within 10 s (20 s in all, the rest waiting for a host CPU) (its console is in the sandbox's logs)",
    );
    expect(startFailureSentence(true, false, plain.ms, 10_000)).not.toContain("host CPU");
  });

  it("says a guest that reset while booting did so (QEMU exited 0 under -no-reboot)", () => {
    expect(startFailureSentence(false, true, 10_000, 3000, true)).toBe(
      "the VM did not start: its guest reset or powered off while booting (its console is in the sandbox's logs)",
    );
    expect(startFailureSentence(false, true, 10_000, 3000, false)).toContain("QEMU exited while starting it");
  });

  it("a parent's abort still ends it at once", () => {
    vi.useFakeTimers();
    const parent = new AbortController();
    const d = new Deadline(10_000, "x", parent.signal, { notCountedMs: () => 60_000, capMs: 20_000 });
    parent.abort(new Error("shutdown"));
    expect([d.signal.aborted, d.timedOut]).toEqual([true, false]);
  });
});

describe("cpuWaitSince", () => {
  const procs: ChildProcess[] = [];
  afterEach(() => {
    for (const p of procs.splice(0)) p.kill("SIGKILL");
  });
  const busy = () => {
    // Two spinning shells on one CPU: each waits while the other runs.
    const p = spawn("taskset", ["-c", "0", "sh", "-c", "while :; do :; done"], { stdio: "ignore" });
    procs.push(p);
    return p.pid as number;
  };

  it("counts a thread's wait for a CPU it shares, and none for a sleeping process", async () => {
    const a = busy();
    busy();
    const sleeper = spawn("sleep", ["30"], { stdio: "ignore" });
    procs.push(sleeper);
    await new Promise((r) => setTimeout(r, 200));
    const waitA = cpuWaitSince(a);
    const waitSleeper = cpuWaitSince(sleeper.pid as number);
    await new Promise((r) => setTimeout(r, 1000));
    expect(waitA()).toBeGreaterThan(100);
    expect(waitSleeper()).toBe(0);
    // A process that is gone: nothing to count.
    expect(cpuWaitSince(2 ** 22 + 12345)()).toBe(0);
  });
});

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startLiveness } from "../src/machine/liveness.js";
import { buildQemuArgs, kernelCmdline } from "../src/vmm/qemu-args.js";
import { TINY_QEMU_SPEC } from "./helpers/qemu-spec.js";

const spec = TINY_QEMU_SPEC;

describe("what an idle VM is started with", () => {
  it("has no PIT under TCG and no soft-lockup watchdog", () => {
    const args = buildQemuArgs(spec);
    expect(args[args.indexOf("-M") + 1]).toBe("microvm,pit=off,memory-backend=mem");
    expect(kernelCmdline(spec).split(" ")).toContain("nowatchdog");
    // No kcompactd wake-up every 500 ms and no PSI averaging every 2 s in an idle guest.
    expect(kernelCmdline(spec).split(" ")).toEqual(expect.arrayContaining(["sysctl.vm.compaction_proactiveness=0", "psi=0"]));
    const kvm = buildQemuArgs({ ...spec, accel: "kvm" });
    expect(kvm[kvm.indexOf("-M") + 1]).toBe("microvm,memory-backend=mem");
  });

  it("boots with the kernel; a restored VM is started without it (its kernel is in its RAM)", () => {
    const boot = buildQemuArgs(spec);
    expect(boot).toEqual(expect.arrayContaining(["-kernel", "vmlinuz", "-initrd", "initrd", "-append"]));
    const restored = buildQemuArgs({ ...spec, incoming: true, memoryFile: { path: "/r", share: false } });
    for (const flag of ["-kernel", "-initrd", "-append"]) expect(restored).not.toContain(flag);
    expect(restored).toEqual(expect.arrayContaining(["-incoming", "defer"]));
  });
});

describe("the liveness watchdog of an idle guest", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const watch = (conn: { busy: boolean; pings: number }) =>
    startLiveness({
      deadlineMs: 20_000,
      idleIntervalMs: 60_000,
      connection: () => ({
        get busy() {
          return conn.busy;
        },
        ping: async () => {
          conn.pings++;
        },
      }),
      quiet: () => false,
      epoch: () => 0,
      ended: () => false,
      onMiss: () => {},
    });

  it("pings every 60 s while no call waits on the guest, every 5 s while one does", async () => {
    const conn = { busy: false, pings: 0 };
    const stop = watch(conn);
    await vi.advanceTimersByTimeAsync(5 * 60_000);
    expect(conn.pings).toBe(5);
    conn.busy = true;
    conn.pings = 0;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(conn.pings).toBe(12);
    stop();
  });
});

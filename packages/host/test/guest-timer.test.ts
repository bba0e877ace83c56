// A cold boot under TCG whose guest lost its timer (a starved APIC timer calibration: the guest
// halts for good with no tick device) is found within seconds and booted again, and a start whose
// every boot lost it fails saying so (docs/architecture.md, "Accelerator"). The VM tests make a
// boot lose its timer for sure (`noapictimer`: the same halt with no tick device); a real starved
// calibration is reproduced by scripts/repro-apic-stall.py (it hits a window of a few ms, too
// narrow for a pass/fail test on a loaded machine).
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { guestArtifacts } from "../src/paths.js";
import { GuestTimerLostError, TIMER_LOST_BOOTS, timerLostState, watchGuestTimer } from "../src/vmm/guest-timer.js";
import { defaultJailConfig } from "../src/vmm/jail.js";
import { QemuVm } from "../src/vmm/qemu-vm.js";
import type { QmpClient } from "../src/vmm/qmp-client.js";
import { startFailureSentence } from "../src/vmm/start-failure.js";
import { artifactsMissing } from "./helpers/guest.js";

const lapic = (lvtt: string, timer: string) =>
  `dumping local APIC state for CPU 0 \r\n\r\nLVT0\t 0x00010700 active-hi edge  masked ExtINT (vec 0)\r\nLVTT\t ${lvtt} active-hi edge  masked         periodic     Fixed  (vec 236)\r\nTimer\t ${timer}\r\nSPIV\t 0x000001ff APIC enabled\r\n`;
const regs = (hlt: 0 | 1) => `RIP=ffffffff81e0c5ee RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=${hlt}\r\n`;
// As read from guests (scripts/repro-apic-stall.py): a failed calibration, a kernel booted with
// `noapictimer`, a healthy guest idle with its timer armed, and one idle with it stopped.
const FAILED_CALIBRATION = lapic("0x000300ec", "DCR=0x3 (divide by 16) initial_count = 268435455 current_count = 29480520");
const NEVER_ARMED = lapic("0x00010000", "DCR=0x0 (divide by 2) initial_count = 0 current_count = 0");
const ARMED = lapic("0x000000ec", "DCR=0x3 (divide by 16) initial_count = 244811 current_count = 193461");
const STOPPED_IN_IDLE = lapic("0x000100ec", "DCR=0x3 (divide by 16) initial_count = 0 current_count = 0");

describe("a guest that lost its timer", () => {
  it("is a halted vCPU whose APIC timer the calibration left masked, or that was never armed", () => {
    expect(timerLostState(FAILED_CALIBRATION, regs(1))).toContain("calibration failed");
    expect(timerLostState(NEVER_ARMED, regs(1))).toContain("never armed");
    // The calibration itself spins: not halted, not lost.
    expect(timerLostState(FAILED_CALIBRATION, regs(0))).toBeNull();
    expect(timerLostState(ARMED, regs(1))).toBeNull();
    expect(timerLostState(STOPPED_IN_IDLE, regs(1))).toBeNull();
    expect(timerLostState("", "")).toBeNull();
  });

  it("is reported once two samples in a row found it, and not while one in between did not or failed", async () => {
    // "" stands for a command that did not answer in time (a loaded host): sampled again.
    const answers = (seq: string[]) => {
      let i = 0;
      const qmp = {
        isClosed: false,
        async execute(_c: string, args: { "command-line": string }) {
          const cur = seq[Math.min(i, seq.length - 1)] ?? "";
          if (cur === "") {
            i++;
            throw new Error("QMP human-monitor-command did not answer within 5000 ms");
          }
          if (args["command-line"] === "info registers") {
            i++;
            return regs(1);
          }
          return cur;
        },
      } as unknown as QmpClient;
      return qmp;
    };
    const signal = new AbortController().signal;
    const lost = watchGuestTimer(answers(["", FAILED_CALIBRATION, FAILED_CALIBRATION]), { signal, intervalMs: 5 });
    await expect(lost.lost).rejects.toBeInstanceOf(GuestTimerLostError);
    const healthy = watchGuestTimer(answers([FAILED_CALIBRATION, "", FAILED_CALIBRATION, ARMED, FAILED_CALIBRATION, ARMED]), {
      signal,
      intervalMs: 5,
    });
    const outcome = await Promise.race([
      healthy.lost.then(
        () => "lost",
        () => "lost",
      ),
      sleep(200, "still watching"),
    ]);
    healthy.stop();
    expect(outcome).toBe("still watching");
  });

  it("fails a start with its own sentence", () => {
    expect(startFailureSentence(false, false, 180_000, 20_000, false, 3)).toBe(
      "the VM did not start: its guest lost its timer while booting, 3 boots in a row (its vCPU was starved while the kernel measured its APIC timer: the host is overloaded; the server's log says more)",
    );
  });
});

describe.skipIf(artifactsMissing() !== null)("a cold boot whose guest lost its timer (real QEMU, TCG)", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "sandtree-timer-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /**
   * A QEMU that adds `append` to the kernel's arguments of the boots `lose` picks (N counts the
   * boots of one start) and writes each boot's console to its own file (`console.log.N`).
   * `noapictimer`: a kernel that never arms its APIC timer halts before /init with no tick device,
   * as one whose calibration was starved does (scripts/repro-apic-stall.py starves a real one).
   */
  function wrapper(name: string, lose: "first" | "every"): string {
    const file = path.join(dir, `${name}.sh`);
    const when = lose === "first" ? '[ "$n" = 1 ]' : "true";
    writeFileSync(
      file,
      `#!/bin/bash
n=$(( $(cat '${dir}/${name}.boots' 2>/dev/null || echo 0) + 1 )); echo $n > '${dir}/${name}.boots'
args=(); prev=
for a in "$@"; do
  [ "$prev" = -append ] && ${when} && a="$a noapictimer"
  case "$a" in file,id=console,path=*) a="$a.$n";; esac
  args+=("$a"); prev=$a
done
exec qemu-system-x86_64 "\${args[@]}"
`,
    );
    chmodSync(file, 0o755);
    return file;
  }

  const start = (name: string, lose: "first" | "every") => {
    const { kernel, initramfs } = guestArtifacts();
    const vm = QemuVm.start({
      name,
      accel: "tcg",
      cpuCores: 1,
      memoryMb: 256,
      kernel,
      initramfs,
      runDir: path.join(dir, `${name}-run`),
      logDir: path.join(dir, `${name}-log`),
      qemuBinary: wrapper(name, lose),
      // The jail has nothing to do with it, and would hide the wrapper script from QEMU's uid.
      jail: defaultJailConfig({ enabled: false }),
    });
    const log = (file: string) => readFileSync(path.join(dir, `${name}-log`, file), "utf8");
    return { vm, qemuLog: () => log("qemu.log"), boots: () => readFileSync(path.join(dir, `${name}.boots`), "utf8").trim() };
  };

  it("is booted again, and the second boot answers", { timeout: 600_000 }, async () => {
    const s = start("st-recover", "first");
    const vm = await s.vm;
    await vm.stop({ graceMs: 0 });
    // It answered its agent (start resolved) on its second boot.
    expect(s.boots()).toBe("2");
    expect(Object.keys(vm.startMarks ?? {})).toContain("boot 1 lost its timer");
    expect(s.qemuLog()).toContain(
      `sandtree: boot 1 of ${TIMER_LOST_BOOTS}: the guest lost its timer while booting: its local APIC timer was never armed`,
    );
    expect(s.qemuLog()).not.toContain("sandtree: boot 2");
  });

  it("fails the start once every boot lost it, saying so", { timeout: 600_000 }, async () => {
    const s = start("st-never", "every");
    const err = await s.vm.then(
      () => null,
      (e: unknown) => e as Error & { code?: string },
    );
    expect(err?.code).toBe("VM_START_FAILED");
    expect(err?.message).toContain(`its guest lost its timer while booting, ${TIMER_LOST_BOOTS} boots in a row`);
    expect(s.boots()).toBe(String(TIMER_LOST_BOOTS));
    for (let boot = 1; boot <= TIMER_LOST_BOOTS; boot++)
      expect(s.qemuLog()).toContain(
        `sandtree: boot ${boot} of ${TIMER_LOST_BOOTS}: the guest lost its timer while booting: its local APIC timer was never armed`,
      );
  });
});

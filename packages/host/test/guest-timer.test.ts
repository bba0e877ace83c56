// A cold boot under TCG whose guest lost its timer (a starved APIC timer calibration: the guest
// halts for good with no tick device) is found within seconds and booted again, and a start whose
// every boot lost it fails saying so (docs/architecture.md, "Accelerator"). The VM tests starve
// the real calibration: a second QMP monitor (added by a wrapper around QEMU) shows when the
// kernel armed its calibration count, and QEMU is stopped (SIGSTOP) across the window, as a
// loaded host deschedules its vCPU thread (scripts/repro-apic-stall.py does the same on bare QEMU).
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { guestArtifacts } from "../src/paths.js";
import { GuestTimerLostError, TIMER_LOST_BOOTS, timerLostState, watchGuestTimer } from "../src/vmm/guest-timer.js";
import { defaultJailConfig } from "../src/vmm/jail.js";
import { QemuVm } from "../src/vmm/qemu-vm.js";
import { QmpClient } from "../src/vmm/qmp-client.js";
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
   * A QEMU that also serves the test a monitor (`NAME-N.qmp`, N the boot), adds `append` to the
   * kernel's arguments and writes each boot's console to its own file (`console.log.N`).
   */
  function wrapper(name: string, append = ""): string {
    const file = path.join(dir, `${name}.sh`);
    writeFileSync(
      file,
      `#!/bin/bash
n=$(( $(cat '${dir}/${name}.boots' 2>/dev/null || echo 0) + 1 )); echo $n > '${dir}/${name}.boots'
args=(); prev=
for a in "$@"; do
  [ "$prev" = -append ] && a="$a${append ? ` ${append}` : ""}"
  case "$a" in file,id=console,path=*) a="$a.$n";; esac
  args+=("$a"); prev=$a
done
exec qemu-system-x86_64 "\${args[@]}" -qmp "unix:${dir}/${name}-$n.qmp,server=on,wait=off"
`,
    );
    chmodSync(file, 0o755);
    return file;
  }

  /**
   * Stops QEMU for 400 ms the moment the kernel armed its APIC calibration count (the loop then
   * catches up the missed TSC ticks at once and measures almost nothing). False when the boot got
   * past the calibration before it was seen.
   */
  async function starveCalibration(socket: string, pid: number): Promise<boolean> {
    const qmp = await QmpClient.connect(socket, { timeoutMs: 20_000 });
    try {
      for (const t0 = Date.now(); Date.now() - t0 < 60_000; ) {
        const state = await qmp.execute<string>("human-monitor-command", { "command-line": "info lapic" });
        if (state.includes("initial_count = 268435455")) {
          process.kill(pid, "SIGSTOP");
          await sleep(400);
          process.kill(pid, "SIGCONT");
          return true;
        }
        // Unmasked: the calibration is over.
        const lvtt = /^LVTT\s+0x([0-9a-f]+)/im.exec(state)?.[1];
        if (lvtt && (Number.parseInt(lvtt, 16) & 0x10000) === 0) return false;
      }
      return false;
    } finally {
      qmp.close();
    }
  }

  const start = (name: string, qemuBinary: string, starve: (boot: number) => boolean) => {
    let boot = 0;
    const starved: Array<Promise<boolean>> = [];
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
      qemuBinary,
      // The jail has nothing to do with it, and would hide the wrapper script from QEMU's uid.
      jail: defaultJailConfig({ enabled: false }),
      onSpawn: (pid) => {
        boot++;
        if (starve(boot)) starved.push(starveCalibration(path.join(dir, `${name}-${boot}.qmp`), pid).catch(() => false));
      },
    });
    const log = (file: string) => readFileSync(path.join(dir, `${name}-log`, file), "utf8");
    return { vm, starved, qemuLog: () => log("qemu.log"), console: (n: number) => log(`console.log.${n}`) };
  };

  it("is booted again, and the second boot answers", { timeout: 600_000 }, async () => {
    // The starvation must land inside a 4 ms window: a start whose first boot's kernel did not
    // say its calibration failed (`ignore_loglevel` shows the warning) proves nothing and is tried
    // again, three starts at most.
    for (let attempt = 1; attempt <= 3; attempt++) {
      const name = `st-recover-${attempt}`;
      const s = start(name, wrapper(name, "ignore_loglevel"), (boot) => boot === 1);
      const vm = await s.vm;
      await vm.stop({ graceMs: 0 });
      await Promise.all(s.starved);
      if (!s.console(1).includes("APIC frequency too slow, disabling apic timer")) continue;
      // It answered its agent (start resolved) after booting again.
      expect(Object.keys(vm.startMarks ?? {})).toContain("boot 1 lost its timer");
      expect(s.qemuLog()).toContain(
        `sandtree: boot 1 of ${TIMER_LOST_BOOTS}: the guest lost its timer while booting: its local APIC timer calibration failed`,
      );
      expect(s.qemuLog()).not.toContain("sandtree: boot 2");
      return;
    }
    throw new Error("no first boot was starved inside its calibration in 3 starts (see the test's comment)");
  });

  it("fails the start once every boot lost it, saying so", { timeout: 600_000 }, async () => {
    // `noapictimer`: a kernel that never arms its APIC timer halts the same way, on every boot.
    const s = start("st-never", wrapper("st-never", "noapictimer"), () => false);
    const err = await s.vm.then(
      () => null,
      (e: unknown) => e as Error & { code?: string },
    );
    expect(err?.code).toBe("VM_START_FAILED");
    expect(err?.message).toContain(`its guest lost its timer while booting, ${TIMER_LOST_BOOTS} boots in a row`);
    for (let boot = 1; boot <= TIMER_LOST_BOOTS; boot++)
      expect(s.qemuLog()).toContain(
        `sandtree: boot ${boot} of ${TIMER_LOST_BOOTS}: the guest lost its timer while booting: its local APIC timer was never armed`,
      );
  });
});

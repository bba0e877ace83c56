import { appendFileSync } from "node:fs";
import type { QmpClient } from "./qmp-client.js";

/**
 * How many times a cold boot is tried when its guest lost its timer (the first boot and the ones
 * after it): the hang follows the host's load at one moment, so a second boot nearly always runs.
 */
export const TIMER_LOST_BOOTS = 3;

/**
 * A booting TCG guest halted for good with no tick device. A one-vCPU guest measures its local
 * APIC timer against the TSC over ~100 ms; when the host takes its vCPU thread away across that
 * window the kernel measures almost no APIC counts, logs "APIC frequency too slow, disabling apic
 * timer" and, with no PIT (`pit=off`) and microvm's hardware-reduced ACPI (no legacy timer at
 * all), has nothing left to wake it (docs/architecture.md, "Accelerator").
 */
export class GuestTimerLostError extends Error {
  override readonly name = "GuestTimerLostError";
}

/**
 * Why a vCPU's state says its guest has no timer left, or null: it is halted and its local APIC
 * timer is masked with either the count the kernel's calibration loads (0x0fffffff, divide by 16:
 * the calibration failed and left it so) or the reset state (never armed: a kernel booted with
 * `noapictimer`). Neither can be halted in a healthy guest: the calibration spins until it ends,
 * and a timer the kernel stopped in idle holds count 0, divide by 16.
 * `lapic` and `registers` are HMP's `info lapic` and `info registers`.
 */
export function timerLostState(lapic: string, registers: string): string | null {
  if (!/\bHLT=1\b/.test(registers)) return null;
  const lvtt = /^LVTT\s+0x([0-9a-f]+)/im.exec(lapic);
  const timer = /DCR=0x([0-9a-f]+).*initial_count = (\d+)/i.exec(lapic);
  if (!lvtt?.[1] || !timer?.[1] || !timer[2] || (Number.parseInt(lvtt[1], 16) & 0x10000) === 0) return null;
  const dcr = Number.parseInt(timer[1], 16);
  const initial = Number(timer[2]);
  if (dcr === 0x3 && initial === 0x0fffffff)
    return "its local APIC timer calibration failed (the vCPU was starved during it) and it halted with no timer";
  if (dcr === 0 && initial === 0) return "its local APIC timer was never armed and it halted with no timer";
  return null;
}

export interface TimerWatch {
  /** Rejects with GuestTimerLostError once the guest is found without a timer; never resolves. */
  lost: Promise<never>;
  stop(): void;
}

/**
 * Samples vCPU 0 over QMP every `intervalMs` while a cold boot waits for its agent, and rejects
 * once `samples` samples in a row found it halted with no timer (timerLostState). Stops by
 * itself once QMP closed or `signal` aborted (the start's own deadline and QEMU's exit cover those).
 */
export function watchGuestTimer(
  qmp: QmpClient,
  opts: { signal: AbortSignal; intervalMs?: number; samples?: number },
): TimerWatch {
  const interval = opts.intervalMs ?? 1000;
  const needed = opts.samples ?? 2;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const hmp = (line: string) =>
    qmp.execute<string>("human-monitor-command", { "command-line": line }, { signal: opts.signal, timeoutMs: 5000 });
  const lost = new Promise<never>((_resolve, reject) => {
    let seen = 0;
    const sample = async () => {
      if (stopped || opts.signal.aborted) return;
      try {
        const why = timerLostState(await hmp("info lapic"), await hmp("info registers"));
        seen = why ? seen + 1 : 0;
        if (why && seen >= needed) {
          reject(new GuestTimerLostError(`the guest lost its timer while booting: ${why}`));
          return;
        }
      } catch {
        // A slow answer on a loaded host is sampled again; a closed QMP ends the watch.
        if (qmp.isClosed) return;
        seen = 0;
      }
      if (!stopped) timer = setTimeout(sample, interval).unref();
    };
    timer = setTimeout(sample, interval).unref();
  });
  // Nobody may be listening when the watch ends with the start (a rejection no one awaits).
  lost.catch(() => {});
  return {
    lost,
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}

/**
 * Writes a boot that lost its timer to the VM's qemu.log (kept after it ended), with the last
 * lines of its console, which the next boot truncates. A log that cannot be written is skipped.
 */
export function noteTimerLost(qemuLog: string, attempt: number, err: GuestTimerLostError, console: string): void {
  const last = console.split("\n").slice(-3).join(" | ");
  try {
    appendFileSync(qemuLog, `sandtree: boot ${attempt} of ${TIMER_LOST_BOOTS}: ${err.message}; console: ${last}\n`);
  } catch {}
}

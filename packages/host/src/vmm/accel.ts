import { accessSync, constants, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Accel, type AccelChoice } from "@sandtree/protocol";
import { cacheDir, guestArtifacts } from "../paths.js";
import { kvmCpuModel } from "./cpu-identity.js";
import { defaultJailConfig, type JailConfig } from "./jail.js";
import { QemuVm } from "./qemu-vm.js";

export type { AccelChoice };

/**
 * Picks the accelerator by trial: KVM only when a test boot actually reaches the agent
 * (a nested or paravirtual KVM can exist and still crash guests), TCG otherwise.
 * The verdict is cached per kernel release. The trial VM runs in `opts.jail` (default: the
 * default jail), as the host's VMs will.
 */
export async function detectAccel(
  choice: AccelChoice = "auto",
  opts: { signal?: AbortSignal; trialMs?: number; jail?: JailConfig } = {},
): Promise<Accel> {
  if (choice !== "auto") return choice;
  try {
    accessSync("/dev/kvm", constants.R_OK | constants.W_OK);
  } catch {
    return "tcg";
  }
  const guest = guestArtifacts();
  const cacheFile = path.join(cacheDir(), "accel.json");
  // A verdict holds for this kernel and this deadline (a longer one may see a slow KVM boot through)
  const trialMs = opts.trialMs ?? 5000;
  // ... and for this KVM CPU model (a named one this host lacks fails the trial).
  const model = kvmCpuModel();
  const key = [guest.kernelRelease, ...(trialMs === 5000 ? [] : [trialMs]), ...(model === "host" ? [] : [model])].join(":");
  if (existsSync(cacheFile)) {
    try {
      const c = JSON.parse(readFileSync(cacheFile, "utf8")) as { key?: string; accel?: Accel };
      if (c.key === key && Accel.safeParse(c.accel).success) return c.accel as Accel;
    } catch {}
  }
  let accel: Accel = "tcg";
  const dir = path.join(tmpdir(), `sandtree-accel-${process.pid}`);
  try {
    const vm = await QemuVm.start({
      name: "sandtree-accel-probe",
      accel: "kvm",
      cpuCores: 1,
      memoryMb: 256,
      kernel: guest.kernel,
      initramfs: guest.initramfs,
      runDir: path.join(dir, "run"),
      logDir: path.join(dir, "log"),
      bootTimeoutMs: trialMs,
      jail: opts.jail ?? defaultJailConfig(),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    await vm.stop({ graceMs: 0 });
    accel = "kvm";
  } catch {
    accel = "tcg";
  }
  mkdirSync(cacheDir(), { recursive: true });
  writeFileSync(cacheFile, JSON.stringify({ key, accel }));
  return accel;
}

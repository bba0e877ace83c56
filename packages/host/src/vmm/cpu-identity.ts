import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Accel } from "@sandtree/protocol";

/**
 * The guest CPU under KVM, as the fleet chose it (SANDTREE_KVM_CPU_MODEL): `host` (the default)
 * gives guests every feature of the host's CPU, so a saved state loads only onto the same CPU;
 * a named QEMU model (`EPYC-Milan`, `Icelake-Server-v4`, ...) gives the same CPU on every host
 * that has at least its features (QEMU's `enforce` refuses to start on one that lacks any), so
 * templates and memory checkpoints move between the hosts of a mixed fleet.
 */
let kvmModel = "host";

/** A QEMU CPU model name: what `-cpu` takes before its first comma. */
export const KVM_CPU_MODEL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Sets the KVM guest CPU for this process (the server's configuration, before any VM starts). */
export function setKvmCpuModel(name: string): void {
  if (!KVM_CPU_MODEL_PATTERN.test(name)) throw new Error(`not a QEMU CPU model name: ${JSON.stringify(name)}`);
  kvmModel = name;
}

export function kvmCpuModel(): string {
  return kvmModel;
}

let hostCpuCache: string | undefined;

/**
 * The host CPU as `-cpu host` shows it to guests: vendor, family, model, stepping and a hash of
 * the feature flags (/proc/cpuinfo's first processor). Two hosts with the same string give
 * guests the same CPUID, so a state saved on one runs on the other.
 */
export function hostCpuSignature(cpuinfo?: string): string {
  if (cpuinfo === undefined && hostCpuCache !== undefined) return hostCpuCache;
  let text = cpuinfo;
  if (text === undefined) {
    try {
      text = readFileSync("/proc/cpuinfo", "utf8");
    } catch {
      text = "";
    }
  }
  const first = text.split(/\n\s*\n/)[0] ?? "";
  const field = (name: string) => new RegExp(`^${name}\\s*:\\s*(.*)$`, "m").exec(first)?.[1]?.trim() ?? "?";
  const flags = field("flags").split(/\s+/).sort().join(" ");
  const hash = createHash("sha256").update(flags).digest("hex").slice(0, 12);
  const sig = `${field("vendor_id")}-${field("cpu family")}-${field("model")}-${field("stepping")}-${hash}`;
  if (cpuinfo === undefined) hostCpuCache = sig;
  return sig;
}

/**
 * What a saved state (template, memory checkpoint, memory image) needs of the CPU it loads onto:
 * `tcg` (QEMU's own model, the same on every host of one QEMU version); under KVM the named
 * model, or `host/` and this host's CPU signature when guests get the host's CPU.
 */
export function cpuIdentity(accel: Accel): string {
  if (accel !== "kvm") return "tcg";
  return kvmModel === "host" ? `host/${hostCpuSignature()}` : kvmModel;
}

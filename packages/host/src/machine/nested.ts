import { readFileSync } from "node:fs";
import type { Accel } from "@sandtree/protocol";

/**
 * Whether this host can give guests hardware virtualization. Under TCG always (emulated SVM);
 * under KVM only when the host's KVM module allows nested guests (`nested` parameter Y or 1).
 */
export function nestedSupport(
  accel: Accel,
  readParam: (file: string) => string | null = readSmall,
): { ok: boolean; why: string } {
  if (accel === "tcg") return { ok: true, why: "TCG emulates AMD SVM for the guest" };
  for (const mod of ["kvm_intel", "kvm_amd"]) {
    const v = readParam(`/sys/module/${mod}/parameters/nested`);
    if (v === null) continue;
    const on = /^(y|1)$/i.test(v.trim());
    return { ok: on, why: on ? `${mod} allows nested guests` : `${mod} is loaded with nested=${v.trim()}` };
  }
  return { ok: false, why: "neither kvm_intel nor kvm_amd is loaded on this host" };
}

function readSmall(file: string): string | null {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return null;
  }
}

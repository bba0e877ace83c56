import { cpuIdentity, type HostCapabilities } from "@sandtree/host";
import { type CreateSandboxParams, type Sandbox, SandtreeError } from "@sandtree/protocol";

/**
 * What a memory state needs of the machine it loads into, as a checkpoint records it: the
 * accelerator; under KVM the guest CPU it ran on (`cpuIdentity`: the fleet's named model, or
 * `host/` and this host's CPU signature); and `+nested` when the guest's CPU offered hardware
 * virtualization (the guest CPU differs, so such a state restores only into the same). `tcg`,
 * `tcg+nested`, `kvm:EPYC-Milan`, `kvm:host/GenuineIntel-6-143-8-...+nested`.
 */
export function machineOf(accel: string | null, nested: boolean | undefined): string | null {
  if (accel === null) return null;
  const base = accel === "kvm" ? `kvm:${cpuIdentity("kvm")}` : accel;
  return nested ? `${base}+nested` : base;
}

/** Refuses nested virtualization where this host's accelerator cannot give it. */
export function refuseUnavailableNesting(
  capabilities: HostCapabilities,
  params: Pick<CreateSandboxParams, "nested_virtualization">,
): void {
  if (!params.nested_virtualization) return;
  const support = capabilities.nested;
  const accel = capabilities.accel;
  if (!support.ok) {
    throw new SandtreeError("NESTED_VIRT_UNAVAILABLE", `nested_virtualization: this host cannot offer it (${support.why})`, {
      field: "nested_virtualization",
      accel,
    });
  }
}

/** Refuses to load a memory state into a machine of another accelerator or CPU model. */
export function refuseOtherMachine(
  checkpoint: { id: string; machine?: string | null | undefined },
  into: { accel: string | null; nested: boolean | undefined },
  what: string,
): void {
  const saved = checkpoint.machine;
  const here = machineOf(into.accel, into.nested);
  if (!saved || !here || saved === here) return;
  throw new SandtreeError(
    "MEMORY_STATE_INCOMPATIBLE",
    `checkpoint ${checkpoint.id}'s memory was saved on a ${saved} machine and cannot load into ${what} (${here})`,
    { checkpoint_id: checkpoint.id, saved, wanted: here },
  );
}

/** The nested_virtualization of a memory checkpoint's machine (null: not recorded). */
export function nestedOfMachine(machine: string | null | undefined): boolean | null {
  return machine ? machine.endsWith("+nested") : null;
}

/** The nested_virtualization a child inherits from the sandbox it was forked or restored from. */
export function inheritedNesting(src: Sandbox | undefined): boolean {
  return src?.nested_virtualization === true;
}

import { SandtreeError } from "@sandtree/protocol";
import { type AdoptSpec, type Machine, type MachineHost, MachineRefusedError } from "../machine/machine.js";
import { checkMachineName } from "../machine/machine-dirs.js";
import { checkMounts } from "../volumes/volume-dirs.js";

/**
 * The adoption of a machine this host service already serves (a caller that reconnected, or a
 * second control plane): what `MachineHost.adopt` checks and does, without adopting it in the host
 * again (QEMU's agent takes one client). The spec is checked as an adoption's is (its name, its
 * mounts' names, mounts on a host that serves none, the pid), the machine paused or resumed as
 * `keepPaused` says; answers the run state it was found in.
 */
export async function readopt(host: MachineHost, m: Machine, spec: AdoptSpec): Promise<string> {
  checkMachineName(spec.name);
  checkMounts(spec.mounts);
  const volumes = host.capabilities.volumes;
  if (spec.mounts?.length && !volumes.ok)
    throw new SandtreeError("NOT_SUPPORTED", `this host does not serve volumes: ${volumes.why}`);
  if (m.pid !== spec.pid) throw new MachineRefusedError(`${spec.name} (pid ${spec.pid}) is not running`);
  const state = (await m.runState({ timeoutMs: spec.deadlineMs })) ?? "gone";
  if (spec.keepPaused) await m.pause();
  else if (state === "paused") await m.resume();
  return state;
}

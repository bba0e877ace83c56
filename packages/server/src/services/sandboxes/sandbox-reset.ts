import type { Machine } from "@sandtree/host";
import { type Sandbox, SandtreeError } from "@sandtree/protocol";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";
import { errorEnd } from "./error-end.js";
import { causeChain, type Provisioner } from "./provisioner.js";
import { ACTIVE, type SandboxMachines } from "./sandbox-machines.js";
import { memoryMbFor } from "./sandbox-paths.js";
import type { SandboxStart } from "./sandbox-site.js";

/** The memory checkpoint a reset goes back to. */
export interface ResetTarget {
  checkpointId: string;
  layerName: string;
  /** The checkpoint's memory state, by name in the host's layers directory. */
  memState: string;
  memoryMb: number | null;
  cpuCores: number | null;
}

interface ResetParts {
  machines: SandboxMachines;
  provisioner: Provisioner;
  store: Store;
  log: Logger;
}

/**
 * Replaces a running sandbox's machine by one resumed from a memory checkpoint (its disk on the
 * checkpoint's layer), keeping the sandbox's id. The guest gets the host clock and fresh entropy
 * on reconnect, as after every restore. A failed reset leaves the sandbox ERROR.
 */
export async function resetInPlace(
  parts: ResetParts,
  sb: Sandbox,
  old: Machine,
  r: ResetTarget,
  started: (start: SandboxStart) => void,
): Promise<void> {
  const { id } = sb;
  if (r.memoryMb !== memoryMbFor(sb.memory_gb) || r.cpuCores !== sb.cpu_cores) {
    throw new SandtreeError("CONFLICT", `checkpoint ${r.checkpointId} was taken from a VM of another size than sandbox ${id}`, {
      checkpoint_id: r.checkpointId,
    });
  }
  const { machines, store } = parts;
  if (machines.resetting.has(id)) throw new SandtreeError("CONFLICT", `sandbox ${id} is already being reset`, { id });
  machines.resetting.add(id);
  try {
    // Out of the map first: calls during the swap get 409 instead of a dying VM.
    machines.take(id);
    const ready = parts.provisioner.replaceForReset(sb, old, { layerName: r.layerName, memState: r.memState });
    started({ sandbox: sb, restored: "memory", ready: ready.catch(() => {}) });
    await ready;
    await store.updateSandbox(id, { head_checkpoint_id: r.checkpointId });
    await store.addEvent(id, `reset to checkpoint ${r.checkpointId}`);
  } catch (err) {
    const reason = `reset failed: ${(err as Error).message}`;
    parts.log.warn({ sandbox: id, reason, detail: causeChain(err) }, "reset failed");
    if (await store.updateSandbox(id, errorEnd("RESET_FAILED", reason), ACTIVE)) {
      await store.addEvent(id, `error: ${reason}`);
    }
    await machines.cleanupDisk(id);
    throw new SandtreeError("VM_START_FAILED", reason, { id });
  } finally {
    machines.resetting.delete(id);
  }
}

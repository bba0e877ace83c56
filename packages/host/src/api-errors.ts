import { SandtreeError } from "@sandtree/protocol";
import { AgentClosedError, GuestError, toSandtreeError } from "./agent/guest-error.js";
import { BlobCorruptError, BlobMissingError } from "./blobs/blob-store.js";
import { MachineRefusedError, MachineTimeoutError } from "./machine/machine.js";
import { DeadlineError } from "./util/deadline.js";
import { QmpClosedError, QmpCommandError, QmpTimeoutError } from "./vmm/qmp-client.js";

/**
 * The host's errors as the API's stable codes: the one table the server applies at its service
 * boundary to whatever a VM, its agent, QEMU or a host tool threw (host tools already throw
 * SandtreeError through `runCommand`). Undefined for an error the host does not know.
 */
export function hostErrorToApi(err: unknown): SandtreeError | undefined {
  if (err instanceof SandtreeError) return err;
  if (err instanceof GuestError || err instanceof AgentClosedError || err instanceof DeadlineError) {
    return toSandtreeError(err) as SandtreeError;
  }
  if (err instanceof QmpTimeoutError || err instanceof MachineTimeoutError) {
    return new SandtreeError(
      "VM_UNRESPONSIVE",
      `${err.message}: the VM is stopped or hung; retry, and delete the sandbox if it persists`,
      {},
      { cause: err },
    );
  }
  if (err instanceof QmpClosedError) {
    return new SandtreeError(
      "VM_ERROR",
      "the VM exited while the server was controlling it; see the sandbox's logs",
      {},
      { cause: err },
    );
  }
  if (err instanceof QmpCommandError || err instanceof MachineRefusedError) {
    const cause = err instanceof MachineRefusedError ? err.cause : err;
    // A remote host's refusal carries the details its worker's host gave as a SandtreeError cause.
    const details =
      cause instanceof QmpCommandError
        ? { qmp_class: cause.qmpClass }
        : cause instanceof SandtreeError
          ? (cause.details ?? {})
          : {};
    return new SandtreeError("VM_ERROR", `the VM refused a command: ${err.message}`, details, { cause: err });
  }
  if (err instanceof BlobCorruptError || err instanceof BlobMissingError) {
    return new SandtreeError("CHECKPOINT_CORRUPT", err.message, { blob_key: err.key }, { cause: err });
  }
  return undefined;
}

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ERROR_STATUS, type ErrorCode, SandtreeError } from "@sandtree/protocol";
import { AgentClosedError, GuestError } from "../agent/guest-error.js";
import { HostError_Kind, HostErrorSchema } from "../gen/sandtree/host/v1/host_pb.js";
import { CheckpointFailedError, MachinePortError, MachineRefusedError, MachineTimeoutError } from "../machine/machine.js";
import { DeadlineError } from "../util/deadline.js";

// The host interface's errors over the wire: the worker turns each into a Connect error carrying
// a HostError detail, and the client throws the same class again, so a caller of RemoteHost sees
// what it would see of the host in-process (GuestError's errno, CheckpointFailedError's machineLost).

function detail(err: unknown): MessageInitShape<typeof HostErrorSchema> {
  if (err instanceof GuestError) return { kind: HostError_Kind.GUEST, errnoCode: err.errnoCode, errno: err.errno };
  if (err instanceof CheckpointFailedError)
    return err.machineLost === null
      ? { kind: HostError_Kind.CHECKPOINT_FAILED }
      : { kind: HostError_Kind.CHECKPOINT_FAILED, machineLost: err.machineLost };
  if (err instanceof MachinePortError)
    return { kind: HostError_Kind.PORT, port: err.port, portRefused: err.refused, errnoCode: err.reason };
  if (err instanceof MachineTimeoutError || err instanceof DeadlineError) return { kind: HostError_Kind.TIMEOUT };
  if (err instanceof MachineRefusedError) return { kind: HostError_Kind.REFUSED };
  if (err instanceof AgentClosedError) return { kind: HostError_Kind.AGENT_CLOSED };
  if (err instanceof SandtreeError) return { kind: HostError_Kind.SANDTREE, code: err.code };
  return { kind: HostError_Kind.UNSPECIFIED };
}

/** Worker side: any error of the host as a Connect error with its kind attached. */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const d = detail(err);
  const code =
    d.kind === HostError_Kind.TIMEOUT
      ? Code.DeadlineExceeded
      : d.kind === HostError_Kind.REFUSED || d.kind === HostError_Kind.CHECKPOINT_FAILED || d.kind === HostError_Kind.PORT
        ? Code.FailedPrecondition
        : d.kind === HostError_Kind.UNSPECIFIED
          ? Code.Internal
          : Code.Unknown;
  return new ConnectError(message, code, undefined, [{ desc: HostErrorSchema, value: create(HostErrorSchema, d) }]);
}

function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_STATUS, code);
}

/** Client side: the error the host would have thrown in-process; transport failures as WORKER_UNREACHABLE. */
export function fromConnectError(err: unknown, what: string): Error {
  const e = ConnectError.from(err);
  const message = e.rawMessage;
  const [d] = e.findDetails(HostErrorSchema);
  if (!d) {
    if (e.code === Code.Unauthenticated) return new SandtreeError("UNAUTHORIZED", `the worker refused ${what}: ${message}`);
    if (e.code === Code.Canceled) return new AgentClosedError(`${what} was cancelled: ${message}`);
    return new SandtreeError("WORKER_UNREACHABLE", `${what} did not reach the worker's host: ${message}`, undefined, {
      cause: err,
    });
  }
  switch (d.kind) {
    case HostError_Kind.GUEST:
      return new GuestError(d.errnoCode, d.errno, message);
    case HostError_Kind.CHECKPOINT_FAILED:
      return new CheckpointFailedError(message, d.machineLost ?? null);
    case HostError_Kind.TIMEOUT:
      return new MachineTimeoutError(message);
    case HostError_Kind.REFUSED:
      return new MachineRefusedError(message);
    case HostError_Kind.PORT:
      return new MachinePortError(message, d.port, d.portRefused, d.errnoCode);
    case HostError_Kind.AGENT_CLOSED:
      return new AgentClosedError(message);
    case HostError_Kind.SANDTREE:
      return isErrorCode(d.code) ? new SandtreeError(d.code, message) : new Error(message);
    default:
      return new Error(message);
  }
}

/** Runs a call to the worker's host service; its failure comes back as the error the worker's host threw (fromConnectError). */
export async function remoteCall<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw fromConnectError(err, what);
  }
}

/** Runs a served call; what it throws goes to the caller as a Connect error with its detail (toConnectError). */
export async function answer<T>(fn: () => Promise<T> | T): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toConnectError(err);
  }
}

/** Runs a served call that answers nothing (Empty). */
export function answerEmpty(fn: () => unknown): Promise<Record<string, never>> {
  return answer(async () => {
    await fn();
    return {};
  });
}

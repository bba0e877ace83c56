import { create, type JsonObject, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorBody, isErrorCode, SandtreeError } from "@sandtree/protocol";
import { AgentClosedError, GuestError } from "../agent/guest-error.js";
import { hostErrorToApi } from "../api-errors.js";
import { HostError_Kind, HostErrorSchema } from "../gen/sandtree/host/v1/host_pb.js";
import { CheckpointFailedError, MachinePortError, MachineRefusedError, MachineTimeoutError } from "../machine/machine.js";
import { DeadlineError } from "../util/deadline.js";

// The host interface's errors over the wire: the worker turns each into a Connect error carrying
// a HostError detail, and the client throws the same class again, so a caller of RemoteHost sees
// what it would see of the host in-process (GuestError's errno, CheckpointFailedError's machineLost,
// a SandtreeError's details) and the API answers its callers alike for a local or a remote host.

type Detail = MessageInitShape<typeof HostErrorSchema>;

/** `details` as JSON (what the API renders of them, even empty); none when there are none or they are not JSON. */
function jsonDetails(details: Record<string, unknown> | undefined): { details?: JsonObject } {
  if (!details) return {};
  try {
    return { details: JSON.parse(JSON.stringify(details)) as JsonObject };
  } catch {
    return {};
  }
}

function detail(err: unknown): { d: Detail; message?: string } {
  if (err instanceof GuestError) return { d: { kind: HostError_Kind.GUEST, errnoCode: err.errnoCode, errno: err.errno } };
  if (err instanceof CheckpointFailedError)
    return {
      d:
        err.machineLost === null
          ? { kind: HostError_Kind.CHECKPOINT_FAILED }
          : { kind: HostError_Kind.CHECKPOINT_FAILED, machineLost: err.machineLost },
    };
  if (err instanceof MachinePortError)
    return { d: { kind: HostError_Kind.PORT, port: err.port, portRefused: err.refused, errnoCode: err.reason } };
  if (err instanceof DeadlineError) return { d: { kind: HostError_Kind.DEADLINE, deadlineWhat: err.what, deadlineMs: err.ms } };
  if (err instanceof MachineTimeoutError) return { d: { kind: HostError_Kind.TIMEOUT } };
  // The API's details of a refusal come from its cause (the VMM's error class), which stays here.
  if (err instanceof MachineRefusedError)
    return { d: { kind: HostError_Kind.REFUSED, ...jsonDetails(hostErrorToApi(err)?.details) } };
  if (err instanceof AgentClosedError) return { d: { kind: HostError_Kind.AGENT_CLOSED } };
  // A SandtreeError as it is; another error the host knows (a VMM's, a blob store's) as the API
  // error it stands for, so its code (not a plain INTERNAL) reaches the caller.
  const api = hostErrorToApi(err);
  if (api) return { d: { kind: HostError_Kind.SANDTREE, code: api.code, ...jsonDetails(api.details) }, message: api.message };
  return { d: { kind: HostError_Kind.UNSPECIFIED } };
}

/** Worker side: any error of the host as a Connect error with its kind attached. */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  const { d, message = err instanceof Error ? err.message : String(err) } = detail(err);
  const code =
    d.kind === HostError_Kind.TIMEOUT || d.kind === HostError_Kind.DEADLINE
      ? Code.DeadlineExceeded
      : d.kind === HostError_Kind.REFUSED || d.kind === HostError_Kind.CHECKPOINT_FAILED || d.kind === HostError_Kind.PORT
        ? Code.FailedPrecondition
        : d.kind === HostError_Kind.UNSPECIFIED
          ? Code.Internal
          : Code.Unknown;
  return new ConnectError(message, code, undefined, [{ desc: HostErrorSchema, value: create(HostErrorSchema, d) }]);
}

/** The details that came with an error, checked: a JSON object, or none. */
function detailsIn(details: JsonObject | undefined): Record<string, unknown> | undefined {
  const r = ErrorBody.shape.details.safeParse(details);
  return r.success ? r.data : undefined;
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
  const details = detailsIn(d.details);
  switch (d.kind) {
    case HostError_Kind.GUEST:
      return new GuestError(d.errnoCode, d.errno, message);
    case HostError_Kind.CHECKPOINT_FAILED:
      return new CheckpointFailedError(message, d.machineLost ?? null);
    case HostError_Kind.TIMEOUT:
      return new MachineTimeoutError(message);
    case HostError_Kind.DEADLINE:
      return new DeadlineError(d.deadlineWhat, d.deadlineMs);
    case HostError_Kind.REFUSED:
      // Its API details ride as its cause, where hostErrorToApi reads a refusal's details.
      return details
        ? new MachineRefusedError(message, { cause: new SandtreeError("VM_ERROR", message, details) })
        : new MachineRefusedError(message);
    case HostError_Kind.PORT:
      return new MachinePortError(message, d.port, d.portRefused, d.errnoCode);
    case HostError_Kind.AGENT_CLOSED:
      return new AgentClosedError(message);
    case HostError_Kind.SANDTREE:
      return isErrorCode(d.code) ? new SandtreeError(d.code, message, details) : new Error(message);
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

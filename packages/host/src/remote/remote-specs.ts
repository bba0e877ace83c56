import { create } from "@bufbuild/protobuf";
import { Accel, SandtreeError } from "@sandtree/protocol";
import {
  type AdoptRequest,
  AdoptRequestSchema,
  type ExecSpec as ExecSpecMsg,
  ExecSpecSchema,
  type MachineExit as MachineExitMsg,
  MachineExitSchema,
  type StartRequest,
  StartRequestSchema,
  type VolumeMount as VolumeMountMsg,
} from "../gen/sandtree/host/v1/host_pb.js";
import {
  type AdoptSpec,
  bootAndFiles,
  type ExecSpec,
  type MachineExit,
  MachineRefusedError,
  type MachineSpec,
} from "../machine/machine.js";
import type { VolumeMount } from "../volumes/guest-mount.js";

// The host interface's specs as protobuf messages and back. The worker rebuilds each spec from the
// message alone (protobuf checked its types; the host checks its values as it does in-process).

function opt<K extends string, V>(key: K, v: V | undefined): { [P in K]?: V } {
  return (v === undefined ? {} : { [key]: v }) as { [P in K]?: V };
}

const mountsOut = (m: VolumeMount[] | undefined) =>
  (m ?? []).map((x) => ({ volume: x.volume, guestPath: x.guestPath, readOnly: x.readOnly === true }));
const mountsIn = (m: VolumeMountMsg[]): VolumeMount[] =>
  m.map((x) => ({ volume: x.volume, guestPath: x.guestPath, ...(x.readOnly ? { readOnly: true } : {}) }));

function accelOf(s: string): Accel {
  const r = Accel.safeParse(s);
  if (!r.success) throw new MachineRefusedError(`no accelerator named ${JSON.stringify(s.slice(0, 40))}`);
  return r.data;
}

/** A start's message; a spec with a template is refused (its files are the caller's host's warm caches', not the worker's). */
export function startRequest(spec: MachineSpec): StartRequest {
  if (spec.template)
    throw new SandtreeError(
      "NOT_SUPPORTED",
      "a remote host starts no template of the caller's: its warm caches are the worker's own",
    );
  return create(StartRequestSchema, {
    ...bootAndFiles(spec),
    ...opt("nic", spec.nic),
    ...opt("memoryState", spec.memoryState),
    mounts: mountsOut(spec.mounts),
    ...opt("nested", spec.nested),
    ...opt(
      "rates",
      spec.rates && {
        diskBytesPerSec: BigInt(spec.rates.diskBytesPerSec),
        diskIops: BigInt(spec.rates.diskIops),
        netMbit: BigInt(spec.rates.netMbit),
      },
    ),
  });
}

export function machineSpec(r: StartRequest, signal: AbortSignal): MachineSpec {
  return {
    name: r.name,
    accel: accelOf(r.accel),
    cpuCores: r.cpuCores,
    memoryMb: r.memoryMb,
    kernel: r.kernel,
    initramfs: r.initramfs,
    rootDisk: r.rootDisk,
    ...opt("nic", r.nic && { tap: r.nic.tap, guestNet: r.nic.guestNet }),
    ...opt("memoryState", r.memoryState),
    ...(r.mounts.length > 0 ? { mounts: mountsIn(r.mounts) } : {}),
    ...opt("nested", r.nested),
    ...opt(
      "rates",
      r.rates && {
        diskBytesPerSec: Number(r.rates.diskBytesPerSec),
        diskIops: Number(r.rates.diskIops),
        netMbit: Number(r.rates.netMbit),
      },
    ),
    signal,
  };
}

export function adoptRequest(spec: AdoptSpec): AdoptRequest {
  return create(AdoptRequestSchema, {
    name: spec.name,
    pid: spec.pid,
    deadlineMs: spec.deadlineMs,
    ...opt("guestNet", spec.guestNet),
    keepPaused: spec.keepPaused,
    mounts: mountsOut(spec.mounts),
  });
}

export function adoptSpec(r: AdoptRequest, signal: AbortSignal): AdoptSpec {
  return {
    name: r.name,
    pid: r.pid,
    deadlineMs: r.deadlineMs,
    ...opt("guestNet", r.guestNet),
    keepPaused: r.keepPaused,
    ...(r.mounts.length > 0 ? { mounts: mountsIn(r.mounts) } : {}),
    signal,
  };
}

export function execSpecMsg(machine: string, spec: ExecSpec): ExecSpecMsg {
  return create(ExecSpecSchema, {
    machine,
    argv: spec.argv ?? [],
    ...opt("shell", spec.shell),
    env: spec.env ?? {},
    ...opt("cwd", spec.cwd),
    ...opt("user", spec.user),
    ...opt("timeoutMs", spec.timeoutMs),
    stdin: spec.stdin === true,
    ...opt("pty", spec.pty),
  });
}

export function execSpec(m: ExecSpecMsg): ExecSpec {
  return {
    ...(m.argv.length > 0 ? { argv: m.argv } : {}),
    ...opt("shell", m.shell),
    ...(Object.keys(m.env).length > 0 ? { env: { ...m.env } } : {}),
    ...opt("cwd", m.cwd),
    ...opt("user", m.user),
    ...opt("timeoutMs", m.timeoutMs),
    ...(m.stdin ? { stdin: true } : {}),
    ...opt("pty", m.pty && { rows: m.pty.rows, cols: m.pty.cols }),
  };
}

export function exitMsg(e: MachineExit): MachineExitMsg {
  return create(MachineExitSchema, {
    ...opt("code", e.code ?? undefined),
    ...opt("signal", e.signal ?? undefined),
    expected: e.expected,
    reason: e.reason,
    guestReset: e.guestReset,
  });
}

export function machineExit(m: MachineExitMsg): MachineExit {
  return { code: m.code ?? null, signal: m.signal ?? null, expected: m.expected, reason: m.reason, guestReset: m.guestReset };
}

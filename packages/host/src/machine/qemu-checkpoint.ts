import { rmSync } from "node:fs";
import { createOverlay } from "../disks/overlay.js";
import { layerFile } from "./host-layers.js";
import {
  CheckpointFailedError,
  type CheckpointRequest,
  MachineRefusedError,
  MachineTimeoutError,
  type SavedCheckpoint,
} from "./machine.js";

/** Deadline of a memory save (the whole migration; its QMP commands have the control deadline each). */
const MEMORY_SAVE_DEADLINE_MS = 120_000;

/** What the checkpoint sequence needs of a QEMU machine. */
export interface CheckpointTarget {
  readonly name: string;
  /** Its disk's name in `layersDir`. */
  readonly activeDisk: string | undefined;
  readonly layersDir: string;
  readonly diskError: string | undefined;
  readonly identity: string | null;
  readonly controlDeadlineMs: number;
  pause(opts?: { timeoutMs?: number }): Promise<void>;
  resume(opts?: { timeoutMs?: number }): Promise<void>;
  snapshotDisk(newOverlay: string, opts: { timeoutMs: number }): Promise<string>;
  saveMemory(file: string, opts: { signal: AbortSignal }): Promise<void>;
  fsfreeze(path: string): Promise<void>;
  fsthaw(path: string): Promise<void>;
  syncClock(): void;
  hold(): () => void;
  on(event: "disk-error", fn: (reason: string) => void): unknown;
  off(event: "disk-error", fn: (reason: string) => void): unknown;
}

/** Thaws pending after a freeze that answered only after its checkpoint gave up, per machine. */
const lateThaws = new WeakMap<CheckpointTarget, Promise<void>>();

/**
 * `p` with a deadline, for a checkpoint's calls into the guest; rejects at once on a host disk
 * error (the guest cannot answer then).
 */
function guarded<T>(m: CheckpointTarget, p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onIoError = (reason: string) => finish(new Error(reason));
    const timer = setTimeout(() => finish(new Error(`${what} did not answer within ${Math.round(ms / 1000)} s`)), ms);
    timer.unref();
    function finish(err: Error | null, v?: T) {
      clearTimeout(timer);
      m.off("disk-error", onIoError);
      if (err) reject(err);
      else resolve(v as T);
    }
    m.on("disk-error", onIoError);
    const held = m.diskError;
    if (held) finish(new Error(held));
    p.then(
      (v) => finish(null, v),
      (e: Error) => finish(e),
    );
  });
}

/**
 * The checkpoint sequence of a QEMU machine. The next overlay is made first (it names the current
 * disk relatively), so the guest is frozen only for the snapshot itself: milliseconds. Every call
 * into the guest or QEMU has a deadline and gives up at once when QEMU pauses the VM on a host disk
 * error. On failure the new overlay is removed; `machineLost` says whether the VM must go.
 */
export async function checkpointQemu(m: CheckpointTarget, req: CheckpointRequest): Promise<SavedCheckpoint> {
  // Names in the layers directory, checked before anything is touched (VALIDATION_FAILED).
  const nextDisk = layerFile(m.layersDir, req.nextDisk, "nextDisk");
  const memoryFile = req.memoryFile === undefined ? undefined : layerFile(m.layersDir, req.memoryFile, "memoryFile");
  const qmpMs = m.controlDeadlineMs;
  // A freeze an earlier checkpoint gave up on and that completed late is thawed first.
  const lateThaw = lateThaws.get(m);
  if (lateThaw) await Promise.race([lateThaw, new Promise((r) => setTimeout(r, qmpMs).unref())]);
  const frozenDisk = m.activeDisk;
  if (!frozenDisk) throw new CheckpointFailedError("this machine has no disk to checkpoint", null);
  const release = m.hold();
  let snapshotting = false;
  try {
    await createOverlay(frozenDisk, nextDisk, req.diskSizeBytes, { unsafe: true });
    if (memoryFile) {
      // Stopped, disk and memory agree without a freeze: snapshot, save RAM + devices, run, reset the clock.
      await m.pause({ timeoutMs: qmpMs });
      try {
        snapshotting = true;
        await m.snapshotDisk(nextDisk, { timeoutMs: qmpMs });
        snapshotting = false;
        await m.saveMemory(memoryFile, { signal: AbortSignal.timeout(MEMORY_SAVE_DEADLINE_MS) });
      } finally {
        await m.resume({ timeoutMs: qmpMs }).catch(() => {});
        m.syncClock();
      }
    } else {
      const freezing = m.fsfreeze("/");
      try {
        await guarded(m, freezing, req.freezeDeadlineMs, "the guest's filesystem freeze");
      } catch (err) {
        // The freeze may still complete later (a VM paused on a host disk error runs on once
        // space is back): thaw right then, and let the next checkpoint of this machine wait for it.
        const late = freezing.then(
          () => m.fsthaw("/").catch(() => {}),
          () => {},
        );
        lateThaws.set(m, late);
        void late.finally(() => {
          if (lateThaws.get(m) === late) lateThaws.delete(m);
        });
        throw err;
      }
      try {
        snapshotting = true;
        // Not cut short on a disk-error pause: QMP answers while the VM is paused, and its
        // answer says which disk the VM now writes to (its own deadline covers a hung QEMU).
        await m.snapshotDisk(nextDisk, { timeoutMs: qmpMs });
        snapshotting = false;
      } finally {
        await guarded(m, m.fsthaw("/"), qmpMs, "the guest's thaw").catch(() => {});
      }
    }
  } catch (err) {
    rmSync(nextDisk, { force: true });
    if (memoryFile) rmSync(memoryFile, { force: true });
    const message = (err as Error).message;
    if (err instanceof MachineTimeoutError && !snapshotting) {
      // QEMU serves QMP whatever its guest does: no answer means QEMU itself is stopped or hung.
      const lost = `QEMU did not answer a checkpoint's QMP command (${message}); the VM was killed`;
      throw new CheckpointFailedError(message, lost, { cause: err });
    }
    if (snapshotting && !(err instanceof MachineRefusedError)) {
      // QEMU did not say whether the new overlay is in use: the VM's disk is unknown, so the
      // VM goes rather than writing into a layer we removed.
      const lost = `a checkpoint's disk snapshot got no answer from QEMU (${message})`;
      throw new CheckpointFailedError(message, lost, { cause: err });
    }
    throw new CheckpointFailedError(message, null, { cause: err });
  } finally {
    release();
  }
  return { layer: frozenDisk, memoryState: req.memoryFile ?? null, machine: m.identity };
}

import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { BlobStore } from "../blobs/blob-store.js";
import {
  CapabilitiesResponseSchema,
  LayerDigestSchema,
  type MachineHostService,
  type MachineInfo,
  MachineInfoSchema,
  SavedCheckpointSchema,
} from "../gen/sandtree/host/v1/host_pb.js";
import { type Machine, type MachineHost, MachineRefusedError } from "../machine/machine.js";
import { checkMachineName } from "../machine/machine-dirs.js";
import { imageCalls } from "./host-service-images.js";
import { layerCalls } from "./host-service-layers.js";
import { logCalls } from "./host-service-logs.js";
import { networkCalls } from "./host-service-networks.js";
import { hostStreams } from "./host-service-streams.js";
import { volumeCalls } from "./host-service-volumes.js";
import { readopt } from "./readopt.js";
import { answer, answerEmpty } from "./remote-errors.js";
import { adoptSpec, exitMsg, machineSpec } from "./remote-specs.js";

/** How long an ended machine is still found by a Watch (one opened just after it ended gets its exit). */
const ENDED_KEPT_MS = 60_000;

/** The machines a worker serves, by name, and the holds its clients took on them. */
export class ServedMachines {
  private readonly byName = new Map<string, Machine>();
  private readonly ended = new Map<string, Machine>();
  private readonly holds = new Map<string, () => void>();

  add(m: Machine): Machine {
    this.byName.set(m.name, m);
    this.ended.delete(m.name);
    m.once("exit", () => {
      if (this.byName.get(m.name) === m) {
        this.byName.delete(m.name);
        this.ended.set(m.name, m);
        setTimeout(() => {
          if (this.ended.get(m.name) === m) this.ended.delete(m.name);
        }, ENDED_KEPT_MS).unref();
      }
      for (const [key, release] of this.holds) {
        if (key.startsWith(`${m.name}\0`)) {
          this.holds.delete(key);
          release();
        }
      }
    });
    return m;
  }

  /** The machines running now (a worker stops them when it shuts down). */
  running(): Machine[] {
    return [...this.byName.values()];
  }

  get(name: string): Machine {
    const m = this.byName.get(name);
    if (!m) throw new MachineRefusedError(`no machine named ${JSON.stringify(name.slice(0, 80))} runs on this host`);
    return m;
  }

  /** A live machine, or one that ended a short while ago (to watch: its exit is known). */
  find(name: string): Machine {
    return this.ended.get(name) ?? this.get(name);
  }

  hold(name: string, id: string): void {
    const key = `${name}\0${id}`;
    if (!this.holds.has(key)) this.holds.set(key, this.get(name).hold());
  }

  release(name: string, id: string): void {
    const key = `${name}\0${id}`;
    this.holds.get(key)?.();
    this.holds.delete(key);
  }

  /** Stops every machine still served (the worker's shutdown: machines stop with it). */
  all(): Machine[] {
    return [...this.byName.values()];
  }
}

/** A machine as its caller holds it; `adoptedRunState` where it was adopted again (readopt), else the machine's own. */
export function machineInfo(m: Machine, adoptedRunState = m.adoptedRunState): MachineInfo {
  return create(MachineInfoSchema, {
    name: m.name,
    pid: m.pid,
    ...(m.activeDisk !== undefined ? { activeDisk: m.activeDisk } : {}),
    ...(adoptedRunState !== undefined ? { adoptedRunState } : {}),
    ...(m.diskError !== undefined ? { diskError: m.diskError } : {}),
  });
}

/** Where a worker keeps its networks' state, its blob store (null: none), the largest image import it takes (ServeHostOptions). */
export interface HostServiceLimits {
  networksDir: string;
  blobs: BlobStore | null;
  layoutMaxBytes: number;
}

/** The MachineHostService over one MachineHost (the worker's QEMU host, or a fake one). */
export function machineHostService(
  host: MachineHost,
  served: ServedMachines,
  { networksDir, blobs, layoutMaxBytes }: HostServiceLimits,
): ServiceImpl<typeof MachineHostService> {
  const sig = (ctx: HandlerContext) => ({ signal: ctx.signal });
  return {
    capabilities: () => {
      const c = host.capabilities;
      return create(CapabilitiesResponseSchema, {
        accel: c.accel,
        memorySnapshots: c.memorySnapshots,
        nestedOk: c.nested.ok,
        nestedWhy: c.nested.ok ? "" : c.nested.why,
        volumesOk: c.volumes.ok,
        volumesWhy: c.volumes.ok ? "" : c.volumes.why,
      });
    },
    linkBase: (r) => answer(async () => ({ name: await host.linkBase(r.base) })),
    createDisk: (r, ctx) => answerEmpty(() => host.createDisk(r.backing, r.disk, Number(r.sizeBytes), sig(ctx))),
    flattenLayer: (r, ctx) =>
      answer(async () => {
        const d = await host.flattenLayer(r.layer, r.backing, r.dest, sig(ctx));
        return create(LayerDigestSchema, { sha256: d.sha256, size: BigInt(d.size) });
      }),
    start: (r, ctx) => answer(async () => machineInfo(served.add(await host.start(machineSpec(r, ctx.signal))))),
    // A machine this process still runs (its control plane reconnected) is adopted again as it is, never by the host twice.
    adopt: (r, ctx) =>
      answer(async () => {
        const spec = adoptSpec(r, ctx.signal);
        const live = served.running().find((m) => m.name === spec.name);
        return live ? machineInfo(live, await readopt(host, live, spec)) : machineInfo(served.add(await host.adopt(spec)));
      }),
    survivors: () => answer(async () => ({ survivors: await host.survivors() })),
    killSurvivor: (r) => answerEmpty(() => host.killSurvivor(r.pid, r.name)),
    // The name is checked here too: whatever host is served, a caller's name never leaves its roots.
    discard: (r, ctx) => answerEmpty(() => host.discard(checkMachineName(r.name), sig(ctx))),

    ...layerCalls(host, blobs ? host.layers(blobs) : null),
    ...imageCalls(host.images, layoutMaxBytes),
    ...logCalls(host),

    ...networkCalls(host.networks, networksDir),

    ...hostStreams(served),
    ...volumeCalls(host.volumes, blobs),

    syncClock: (r) => answerEmpty(() => served.get(r.name).syncClock()),
    pause: (r) => answerEmpty(() => served.get(r.machine).pause(r.timeoutMs !== undefined ? { timeoutMs: r.timeoutMs } : {})),
    resume: (r) => answerEmpty(() => served.get(r.machine).resume(r.timeoutMs !== undefined ? { timeoutMs: r.timeoutMs } : {})),
    runState: (r) =>
      answer(async () => {
        const state = await served.get(r.machine).runState({ timeoutMs: r.timeoutMs ?? 5000 });
        return state !== undefined ? { state } : {};
      }),
    checkpoint: (r) =>
      answer(async () => {
        const m = served.get(r.machine);
        const saved = await m.checkpoint({
          nextDisk: r.nextDisk,
          diskSizeBytes: Number(r.diskSizeBytes),
          freezeDeadlineMs: r.freezeDeadlineMs,
          ...(r.memoryFile !== undefined ? { memoryFile: r.memoryFile } : {}),
        });
        return create(SavedCheckpointSchema, {
          layer: saved.layer,
          ...(saved.memoryState !== null ? { memoryState: saved.memoryState } : {}),
          ...(saved.machine !== null ? { machine: saved.machine } : {}),
          ...(m.activeDisk !== undefined ? { activeDisk: m.activeDisk } : {}),
        });
      }),
    hold: (r) => answerEmpty(() => served.hold(r.machine, r.hold)),
    release: (r) => answerEmpty(() => served.release(r.machine, r.hold)),
    // The client's `quiet` predicate stays with the client: it drops an `unresponsive` it says is on purpose.
    supervise: (r) => answerEmpty(() => served.get(r.machine).supervise({ agentDeadlineMs: r.agentDeadlineMs })),
    stop: (r) =>
      answer(async () => exitMsg(await served.get(r.machine).stop(r.graceMs !== undefined ? { graceMs: r.graceMs } : {}))),
    forceKill: (r) => answerEmpty(() => served.get(r.name).forceKill()),
  };
}

import { machineCapacity } from "@sandtree/host";
import { type Accel, type Sandbox, TERMINAL_STATUSES } from "@sandtree/protocol";
import type { Store } from "../../store/store.js";
import type { ImageResolver } from "../image-resolver.js";
import type { Logger } from "../logger.js";
import { ACTIVE } from "../sandbox-machines.js";
import type { FleetService } from "./fleet-service.js";

export interface LocalHostDeps {
  fleet: FleetService;
  store: Store;
  images: ImageResolver;
  dataDir: string;
  accel: Accel;
  log: Logger;
}

async function imageDigests(images: ImageResolver): Promise<string[]> {
  try {
    return [...new Set((await images.list()).map((i) => i.digest))].sort();
  } catch {
    return [];
  }
}

/**
 * Single-box mode's local worker as a fleet host named `local`: registered with this
 * machine's capacity and cached images, its sandboxes recorded as placements (so `GET
 * /v1/hosts` shows its usage), and its capacity and images refreshed with each heartbeat.
 * Nothing is placed on remote workers: running sandboxes there is not built yet.
 */
export class LocalHost {
  private lastCapacity = "";
  private lastImages = "";

  constructor(private readonly deps: LocalHostDeps) {}

  /** Registers, then makes the placements match the active sandboxes (after reconciliation). */
  async start(): Promise<void> {
    const { fleet, store } = this.deps;
    const capacity = machineCapacity(this.deps.dataDir, this.deps.accel);
    const images = await imageDigests(this.deps.images);
    this.lastCapacity = JSON.stringify(capacity);
    this.lastImages = JSON.stringify(images);
    await fleet.startLocal(capacity, { images }, () => this.beat());
    const active = (await Promise.resolve(store.listSandboxesByStatus(ACTIVE))) as Sandbox[];
    const placed = new Set(await fleet.localPlacements());
    const ids = new Set(active.map((s) => s.id));
    for (const s of active) if (!placed.has(s.id)) await fleet.placeLocal(s);
    for (const id of placed) if (!ids.has(id)) await fleet.release(id);
    store.onSandboxStatus((id, patch) => {
      if (!patch.status) return;
      void this.follow(id, patch.status).catch((err: Error) =>
        this.deps.log.warn({ sandbox_id: id, err: err.message }, "recording the local host's usage failed"),
      );
    });
  }

  private async follow(id: string, status: string): Promise<void> {
    if ((TERMINAL_STATUSES as readonly string[]).includes(status)) {
      await this.deps.fleet.release(id);
      return;
    }
    if (status !== "PROVISIONING") return;
    const sb = (await Promise.resolve(this.deps.store.getSandbox(id))) as Sandbox | undefined;
    if (sb) await this.deps.fleet.placeLocal(sb);
  }

  /** The heartbeat: capacity and images sent only when they changed. */
  async beat(): Promise<void> {
    const capacity = machineCapacity(this.deps.dataDir, this.deps.accel);
    const images = await imageDigests(this.deps.images);
    const c = JSON.stringify(capacity);
    const i = JSON.stringify(images);
    await this.deps.fleet.beatLocal({
      ...(c !== this.lastCapacity ? { capacity } : {}),
      ...(i !== this.lastImages ? { locality: { images } } : {}),
    });
    this.lastCapacity = c;
    this.lastImages = i;
  }
}

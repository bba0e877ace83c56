import { randomBytes } from "node:crypto";
import { closeSync, openSync, readFileSync, writeSync } from "node:fs";
import path from "node:path";
import { machineCapacity } from "@sandtree/host";
import { type Accel, type Sandbox, TERMINAL_STATUSES } from "@sandtree/protocol";
import type { Store } from "../../store/store.js";
import type { ImageResolver } from "../images/image-resolver.js";
import type { Logger } from "../observability/logger.js";
import { ACTIVE } from "../sandboxes/sandbox-machines.js";
import type { FleetService } from "./fleet-service.js";
import { LOCAL_HOST } from "./host-names.js";

/**
 * The name of this control plane's own host. With a store of its own (SQLite) it is `local`. When
 * several control planes share the store (PostgreSQL) each needs its own: `local-<id>`, made once and
 * kept in `<data-dir>/local-host-name`, so a restarted server finds its own placements again.
 */
export function localHostName(dataDir: string, shared: boolean): string {
  if (!shared) return LOCAL_HOST;
  const file = path.join(dataDir, "local-host-name");
  try {
    const fd = openSync(file, "wx", 0o644);
    try {
      writeSync(fd, `${LOCAL_HOST}-${randomBytes(6).toString("hex")}\n`);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  const name = readFileSync(file, "utf8").trim();
  if (!/^local-[a-z0-9-]{1,56}$/.test(name)) throw new Error(`${file} must hold a name like local-<letters and digits>`);
  return name;
}

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

  /** Registers this machine's host (before reconciliation, which reads its placements). */
  async register(): Promise<void> {
    const capacity = machineCapacity(this.deps.dataDir, this.deps.accel);
    const images = await imageDigests(this.deps.images);
    this.lastCapacity = JSON.stringify(capacity);
    this.lastImages = JSON.stringify(images);
    await this.deps.fleet.startLocal(capacity, { images }, () => this.beat());
  }

  /**
   * After reconciliation: makes the placements match the active sandboxes this process runs
   * (`owned`, those reconciliation took as its own; null: every active sandbox, a store of its
   * own), then follows their status changes.
   */
  async start(owned: ReadonlySet<string> | null): Promise<void> {
    const { fleet, store } = this.deps;
    const listed = (await Promise.resolve(store.listSandboxesByStatus(ACTIVE))) as Sandbox[];
    const active = owned ? listed.filter((s) => owned.has(s.id)) : listed;
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

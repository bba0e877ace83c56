import { randomBytes } from "node:crypto";
import type { VolumeMount as HostVolumeMount, HostVolumes } from "@sandtree/host";
import {
  CreateVolumeRequest,
  type FileList,
  type FileStat,
  type SandboxVolume,
  SandtreeError,
  type TeamLimits,
  type Volume,
  type VolumeMount,
  VolumeMounts,
} from "@sandtree/protocol";
import { parse } from "../../errors.js";
import { MADE_HERE, type VolumeMountRow, type VolumeRow, type VolumeStore } from "../../store/volume-rows.js";
import type { Logger } from "../observability/logger.js";
import { KeyedSerial } from "../support/keyed-serial.js";
import type { VolumeHosts } from "./volume-hosts.js";
import { VolumeMeasures } from "./volume-measures.js";
import { quotaCheck } from "./volume-quota.js";
import { SNAPSHOT_OF_LABEL, snapshotName } from "./volume-snapshot-names.js";
import type { VolumesAway } from "./volumes-away.js";

const GiB = 1024 ** 3;

export function newVolumeId(): string {
  return `vol-${randomBytes(8).toString("hex")}`;
}

export interface VolumeServiceDeps {
  store: VolumeStore;
  /**
   * The volumes port of each host (by a volume's `host_id`: through that host's bundle): each volume
   * named there by its id, as mounts name it.
   */
  hosts: VolumeHosts;
  limits: (teamId: string) => Promise<TeamLimits>;
  log: Logger;
  /** Whether creates may mount volumes (a host's file server, or moves to hosts that have one): else a create naming volumes is NOT_SUPPORTED. */
  mountsSupported: boolean;
  /** On a fleet's control plane: volumes that moved to workers (VolumeMoves). */
  away?: VolumesAway;
}

/**
 * Volumes as a team's resource, their storage on the host each lives on (that host's volumes port:
 * made on this control plane's own, moved by VolumeMoves), and their file API (no sandbox needed).
 * States: CREATING (row written, storage being made), READY, DELETING (no sandbox mounts it; its
 * storage being removed), DELETED. Every step is idempotent: a server that
 * stops between two finishes it at its next start (reconcile).
 */
export class VolumeService {
  /** Writes through the API to one volume run one at a time (its size check reads what the others wrote). */
  private readonly writes = new KeyedSerial();
  /**
   * How old a `used_bytes` a GET may answer, in ms: a measure walks the tree (an lstat per file),
   * at most once per this long for GETs (sharing one walk); API writes walk before they write.
   */
  measureTtlMs = 30_000;
  private readonly measures: VolumeMeasures;

  constructor(private readonly deps: VolumeServiceDeps) {
    this.measures = new VolumeMeasures(deps.store, deps.hosts, () => this.measureTtlMs);
  }

  /** The volumes port of the host a volume lives on. */
  private portOf(row: Pick<VolumeRow, "host_id">): Promise<HostVolumes> {
    return this.deps.hosts.of(row.host_id);
  }

  /** A new volume is made on this control plane's own host. */
  async create(teamId: string, raw: unknown): Promise<Volume> {
    const req = parse(CreateVolumeRequest, raw);
    const here = await this.deps.hosts.of(null);
    const row = await this.make(teamId, req.name, req.size_gb, req.labels, null, (id) => here.create(id, req.size_gb));
    return this.view(row);
  }

  /**
   * A new volume of the team (quotas checked) on host `hostId` (null: this control plane's own),
   * its storage made and filled there by `fill` (given its id, its name on the host): CREATING while
   * it runs, READY after, DELETED (and its storage gone) when it fails.
   */
  private async make(
    teamId: string,
    name: string,
    sizeGb: number,
    labels: Record<string, string>,
    hostId: string | null,
    fill: (id: string) => Promise<unknown>,
  ): Promise<VolumeRow> {
    const limits = await this.deps.limits(teamId);
    const now = new Date().toISOString();
    const row: VolumeRow = {
      id: newVolumeId(),
      team_id: teamId,
      name,
      status: "CREATING",
      size_gb: sizeGb,
      labels,
      used_bytes: 0,
      created_at: now,
      updated_at: now,
      ...MADE_HERE,
      host_id: hostId,
    };
    const created = await this.deps.store.createVolume(row, (u) => quotaCheck(u, sizeGb, limits));
    if (!created) {
      throw new SandtreeError("ALREADY_EXISTS", `the team has a volume named ${name} already`, { name });
    }
    try {
      await fill(row.id);
    } catch (err) {
      await this.removeStorage(row).catch(() => {});
      await this.deps.store.setVolumeState(row.id, "DELETED", ["CREATING"]);
      if (err instanceof SandtreeError) throw err;
      const full = ["ENOSPC", "EDQUOT"].includes((err as NodeJS.ErrnoException).code ?? "");
      throw new SandtreeError(
        full ? "HOST_DISK_FULL" : "INTERNAL",
        `could not make the volume's storage: ${(err as Error).message}`,
      );
    }
    await this.deps.store.setVolumeState(row.id, "READY", ["CREATING"]);
    return this.measures.measure({ ...row, status: "READY" });
  }

  /**
   * `volumes: "snapshot"` of a restore or fork: a copy-on-write snapshot of each volume the source
   * sandbox mounts, each a new volume of the team (named, listed, metered, deleted like any) on the
   * host its source lives on, mounted at the same path. All or none: a failure deletes the
   * snapshots already made.
   */
  async snapshotMounts(teamId: string, sourceSandboxId: string): Promise<VolumeMount[]> {
    const out: VolumeMount[] = [];
    try {
      for (const m of await this.deps.store.mountsOf(sourceSandboxId)) {
        const src = await this.row(teamId, m.volume_id);
        if (src.status !== "READY")
          throw new SandtreeError("CONFLICT", `volume ${src.name} is ${src.status}`, { volume: src.id });
        const labels = { ...src.labels, [SNAPSHOT_OF_LABEL]: src.id };
        const port = await this.portOf(src);
        const snap = await this.writes.run(src.id, () =>
          this.make(teamId, snapshotName(src.name), src.size_gb, labels, src.host_id, (id) =>
            port.snapshot(src.id, id, src.size_gb),
          ),
        );
        out.push({ volume: snap.id, path: m.path, read_only: m.read_only });
      }
    } catch (err) {
      await this.discard(out.map((m) => m.volume));
      throw err;
    }
    return out;
  }

  /** Deletes volumes this server made for a create that did not happen (snapshots): never throws. */
  async discard(ids: readonly string[]): Promise<void> {
    for (const id of ids) {
      const { changed } = await this.deps.store.beginDeleteVolume(id).catch(() => ({ changed: false }));
      const row = changed ? await this.deps.store.getVolume(id) : undefined;
      if (row) await this.finishDelete(row).catch(() => {});
    }
  }

  async list(teamId: string): Promise<Volume[]> {
    const rows = await this.deps.store.listVolumes({ teamId });
    return Promise.all(rows.map((r) => this.view(r)));
  }

  /** The volume, its bytes measured again. */
  async get(teamId: string, ref: string): Promise<Volume> {
    const row = await this.row(teamId, ref);
    return this.view(await this.measures.measure(row));
  }

  /**
   * Deletes the volume unless a sandbox not ended mounts it (VOLUME_IN_USE, naming them).
   * Deleting one already DELETING finishes the job; its files go, then the row is DELETED.
   */
  async delete(teamId: string, ref: string): Promise<void> {
    const row = await this.row(teamId, ref);
    if (row.status === "MOVING")
      throw new SandtreeError("CONFLICT", `volume ${row.name} is MOVING: try again`, { volume: row.id });
    const { changed, mounters } = await this.deps.store.beginDeleteVolume(row.id);
    if (mounters.length > 0) {
      throw new SandtreeError("VOLUME_IN_USE", `volume ${row.name} is mounted by ${mounters.join(", ")}: delete them first`, {
        volume: row.id,
        sandboxes: mounters,
      });
    }
    if (!changed) throw notFound(ref);
    // Its copies elsewhere (a lost home's, the object store's) go first: a delete that fails there can be asked again.
    if (this.deps.away) await this.deps.away.dropAway(row);
    await this.finishDelete(row);
  }

  /** Its storage goes from its host (a lost home's copy was recorded stale by dropAway: dropped when it is back). */
  private async finishDelete(row: VolumeRow): Promise<void> {
    this.measures.forget(row.id);
    if (!row.home_lost_at) await this.writes.run(row.id, () => this.removeStorage(row));
    await this.deps.store.setVolumeState(row.id, "DELETED", ["DELETING"]);
  }

  /** Its host's copy of a volume removed (unmounted, then its image and files deleted): idempotent. */
  private async removeStorage(row: Pick<VolumeRow, "id" | "host_id">): Promise<void> {
    await (await this.portOf(row)).remove(row.id);
  }

  /**
   * At start: mounts the volumes' images again, finishes creates and deletes a stopped server left
   * half done, for the volumes whose host `on` takes (this host's before its sandboxes are adopted,
   * the workers' once their bundles are open). A lost home's volumes wait for it (or a restore).
   */
  async reconcile(on: (hostId: string | null) => boolean): Promise<void> {
    for (const v of await this.deps.store.listVolumes({ states: ["READY", "CREATING", "DELETING"] })) {
      if (!on(v.host_id) || (v.home_lost_at && v.status !== "DELETING")) continue;
      try {
        if (v.status === "DELETING") await this.finishDelete(v);
        else if (v.status === "READY") await (await this.portOf(v)).open(v.id);
        else {
          await (await this.portOf(v)).create(v.id, v.size_gb);
          await this.deps.store.setVolumeState(v.id, "READY", ["CREATING"]);
        }
      } catch (err) {
        this.deps.log.warn({ volume: v.id, err: (err as Error).message }, "could not finish a volume's create or delete");
      }
    }
  }

  /**
   * A create's `volumes`: each must be the team's and READY (else 404 / 409), paths checked by
   * the schema. Answers the rows to record with the sandbox (attachVolumes) once it may mount them.
   */
  async resolveMounts(
    teamId: string,
    raw: readonly VolumeMount[] | string | undefined,
    network = true,
  ): Promise<Omit<VolumeMountRow, "sandbox_id">[]> {
    if (typeof raw === "string") {
      throw new SandtreeError("VALIDATION_FAILED", `volumes: "${raw}" names a source sandbox's volumes: give checkpoint_id`, {
        field: "volumes",
      });
    }
    if (raw === undefined || raw.length === 0) return [];
    if (!network) {
      // Volumes are NFS over the sandbox's own network interface.
      throw new SandtreeError("NETWORK_DISABLED", "volumes are mounted over the sandbox's network: drop network: false", {
        field: "volumes",
      });
    }
    const mounts = parse(VolumeMounts, raw);
    const out: Omit<VolumeMountRow, "sandbox_id">[] = [];
    for (const m of mounts) {
      const v = await this.row(teamId, m.volume);
      if (v.status !== "READY") throw new SandtreeError("CONFLICT", `volume ${v.name} is ${v.status}`, { volume: v.id });
      out.push({ volume_id: v.id, path: m.path, read_only: m.read_only });
    }
    if (new Set(out.map((m) => m.volume_id)).size !== out.length) {
      throw new SandtreeError("VALIDATION_FAILED", "volumes: the same volume named twice", { field: "volumes" });
    }
    if (!this.deps.mountsSupported) {
      throw new SandtreeError(
        "NOT_SUPPORTED",
        "volumes cannot be mounted in sandboxes on this server (it needs sandbox networks and NFS-Ganesha): create the sandbox without them",
        { field: "volumes" },
      );
    }
    return out;
  }

  /**
   * Records a created sandbox's mounts (what resolveMounts answered), each volume still READY at
   * that moment: a volume deleted meanwhile fails the create (CONFLICT) rather than mount nothing.
   */
  async attach(sandboxId: string, mounts: readonly Omit<VolumeMountRow, "sandbox_id">[]): Promise<void> {
    if (mounts.length === 0) return;
    const ok = await this.deps.store.attachVolumes(
      sandboxId,
      mounts.map((m) => ({ ...m, sandbox_id: sandboxId })),
    );
    if (!ok) throw new SandtreeError("CONFLICT", "a volume of this create was deleted meanwhile", { field: "volumes" });
  }

  /** A sandbox's mounts as its machine takes them (volumes by id: its host finds them), for every start, restore and adoption. */
  async machineMounts(sandboxId: string): Promise<HostVolumeMount[]> {
    return (await this.deps.store.mountsOf(sandboxId)).map((m) => ({
      volume: m.volume_id,
      guestPath: m.path,
      readOnly: m.read_only,
    }));
  }

  /** The Sandbox answer's `volumes`, for each of these sandboxes (absent: none). */
  async sandboxVolumes(sandboxIds: readonly string[]): Promise<Map<string, SandboxVolume[]>> {
    const out = new Map<string, SandboxVolume[]>();
    for (const m of await this.deps.store.mountsOfSandboxes(sandboxIds)) {
      const list = out.get(m.sandbox_id) ?? [];
      list.push({ volume_id: m.volume_id, name: m.name, path: m.path, read_only: m.read_only });
      out.set(m.sandbox_id, list);
    }
    return out;
  }

  /** A sandbox's mounts as a create names them: what its forks and restores mount by default. */
  async mountsAsRequest(sandboxId: string): Promise<VolumeMount[]> {
    return (await this.deps.store.mountsOf(sandboxId)).map((m) => ({
      volume: m.volume_id,
      path: m.path,
      read_only: m.read_only,
    }));
  }

  // The file API: the same routes and semantics as a sandbox's files, on the volume's storage
  // through the volumes port of the host it lives on.

  /**
   * The volume whose files are asked for: READY, brought to this control plane's own host first when
   * it lives on another (VolumesAway.bringHome: refused while a sandbox there mounts it).
   */
  private async readyHere(teamId: string, ref: string): Promise<VolumeRow & { port: HostVolumes }> {
    let row = await this.row(teamId, ref);
    if (row.host_id !== null && row.status === "READY" && this.deps.away) row = await this.deps.away.bringHome(row);
    if (row.status !== "READY") throw new SandtreeError("CONFLICT", `volume ${row.name} is ${row.status}`, { volume: row.id });
    return { ...row, port: await this.portOf(row) };
  }

  stat = async (teamId: string, ref: string, p: string): Promise<FileStat> => {
    const v = await this.readyHere(teamId, ref);
    return v.port.stat(v.id, p);
  };

  listFiles = async (teamId: string, ref: string, p: string): Promise<FileList> => {
    const v = await this.readyHere(teamId, ref);
    return v.port.list(v.id, p);
  };

  async download(teamId: string, ref: string, p: string, opts: { offset?: number; length?: number }) {
    const v = await this.readyHere(teamId, ref);
    return v.port.read(v.id, p, opts);
  }

  async mkdir(teamId: string, ref: string, p: string, parents: boolean, mode: number): Promise<FileStat> {
    const v = await this.readyHere(teamId, ref);
    return v.port.mkdir(v.id, p, { parents, mode });
  }

  async upload(teamId: string, ref: string, p: string, body: AsyncIterable<Uint8Array>, mode = 0o644) {
    const row = await this.readyHere(teamId, ref);
    return this.writes.run(row.id, async () => {
      // The size check needs what guests wrote too: a walk, whatever the last GET measured.
      const used = (await this.measures.measure(row, true)).used_bytes;
      const out = await row.port.write(row.id, p, body, { mode, limitBytes: row.size_gb * GiB, usedBytes: used });
      await this.measures.record(row.id, used - out.replaced + out.bytes, used);
      return { path: out.path, bytes: out.bytes };
    });
  }

  async remove(teamId: string, ref: string, p: string, recursive: boolean): Promise<void> {
    const row = await this.readyHere(teamId, ref);
    await this.writes.run(row.id, async () => {
      try {
        await row.port.removePath(row.id, p, { recursive });
      } finally {
        await this.measures.measure(row, true);
      }
    });
  }

  row(teamId: string, ref: string): Promise<VolumeRow> {
    return volumeRow(this.deps.store, teamId, ref);
  }

  private async view(row: VolumeRow): Promise<Volume> {
    const mounted_by = row.status === "DELETED" ? [] : await this.deps.store.mountersOf(row.id);
    const { host_id: _host, move_to: _to, sync_key: _key, sync_sha256: _sha, ...shown } = row;
    return { ...shown, mounted_by };
  }
}

/** A volume of the team by id or name (404 otherwise). */
export async function volumeRow(store: Pick<VolumeStore, "getVolume">, teamId: string, ref: string): Promise<VolumeRow> {
  const row = await store.getVolume(ref, teamId);
  if (!row) throw notFound(ref);
  return row;
}

function notFound(ref: string): SandtreeError {
  return new SandtreeError("VOLUME_NOT_FOUND", `volume ${ref} not found`, { volume: ref });
}

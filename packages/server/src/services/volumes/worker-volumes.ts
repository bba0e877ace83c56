import type { BlobStore } from "@sandtree/host";
import { type PackedVolume, SandtreeError, VolumeDropRequest, VolumePackRequest, VolumeUnpackRequest } from "@sandtree/protocol";
import { parse } from "../../errors.js";
import type { VolumeService } from "./volume-service.js";

export interface WorkerVolumesDeps {
  volumes: VolumeService;
  /** The fleet's object store (through its local cache): the volumes' host packs into it and unpacks from it. */
  blobs: BlobStore;
  /** The worker's own team: every sandbox and volume the control plane runs here is its. */
  teamId: string;
}

/**
 * A worker's side of volumes in the fleet. The control plane's record stays the volume's; here a
 * volume it moved in is a volume of the worker's team named by the control plane's volume id (so
 * a forwarded create's `volumes` finds it by that name), made when it arrives and deleted when it
 * leaves. Each call is idempotent: a control plane that resumes a move asks again.
 */
export class WorkerVolumes {
  constructor(private readonly deps: WorkerVolumesDeps) {}

  /**
   * Packs the volume into the object store under the key given (VOLUME_NOT_FOUND when it is not
   * here): its tree as it is (a move: no sandbox mounts it), or, for a sync while sandboxes mount it
   * (`snapshot`), a snapshot of it taken while frozen.
   */
  async pack(raw: unknown, signal?: AbortSignal): Promise<PackedVolume> {
    const req = parse(VolumePackRequest, raw);
    const row = await this.deps.volumes.row(this.deps.teamId, req.volume);
    if (row.status !== "READY")
      throw new SandtreeError("CONFLICT", `volume ${req.volume} is ${row.status} here`, { volume: req.volume });
    const archives = this.deps.volumes.storage.archives(this.deps.blobs);
    return archives.store(row.id, req.key, { snapshot: req.snapshot, sizeGb: row.size_gb, ...(signal ? { signal } : {}) });
  }

  /** Unpacks the archive as the volume here: a new volume, or the files of one already here replaced. */
  async unpack(raw: unknown, signal?: AbortSignal): Promise<{ volume: string }> {
    const req = parse(VolumeUnpackRequest, raw);
    const { volumes, blobs, teamId } = this.deps;
    const have = await volumes.row(teamId, req.volume).catch(() => undefined);
    const archives = volumes.storage.archives(blobs);
    const sig = signal ? { signal } : {};
    if (have && have.status === "READY") {
      if ((await volumes.get(teamId, have.id)).mounted_by.length > 0)
        throw new SandtreeError("VOLUME_IN_USE", `volume ${req.volume} is mounted here`, { volume: req.volume });
      await archives.fetch(req.archive, have.id, have.size_gb, sig);
    } else {
      const fill = (id: string) => archives.fetch(req.archive, id, req.size_gb, sig);
      await volumes.make(teamId, req.volume, req.size_gb, {}, fill, { checkQuota: false });
    }
    // The object is the control plane's to delete once the move is recorded: only this cache's copy goes.
    await blobs.delete(req.archive.key).catch(() => {});
    return { volume: req.volume };
  }

  /** Deletes this host's copy of a volume that left (or was deleted); one not here is already dropped. */
  async drop(raw: unknown): Promise<{ volume: string }> {
    const req = parse(VolumeDropRequest, raw);
    try {
      await this.deps.volumes.delete(this.deps.teamId, req.volume);
    } catch (err) {
      if (!(err instanceof SandtreeError && err.code === "VOLUME_NOT_FOUND")) throw err;
    }
    return { volume: req.volume };
  }
}

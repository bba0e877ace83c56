import type { BlobStore, VolumeImages } from "@sandtree/host";
import { type PackedVolume, SandtreeError, VolumeDropRequest, VolumePackRequest, VolumeUnpackRequest } from "@sandtree/protocol";
import { parse } from "../../errors.js";
import { packVolume, unpackVolume } from "./volume-archive.js";
import type { VolumeService } from "./volume-service.js";
import { packSnapshot } from "./volume-sync-pack.js";

export interface WorkerVolumesDeps {
  volumes: VolumeService;
  blobs: BlobStore;
  /** The volumes' images (a sync's consistent copy of a mounted volume is a snapshot of its image). */
  images: VolumeImages;
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
    const dir = this.deps.volumes.dirOf(row.id);
    if (req.snapshot) return packSnapshot(this.deps.images, this.deps.blobs, dir, row.size_gb, req.key, signal);
    return packVolume(this.deps.blobs, dir, req.key, signal);
  }

  /** Unpacks the archive as the volume here: a new volume, or the files of one already here replaced. */
  async unpack(raw: unknown, signal?: AbortSignal): Promise<{ volume: string }> {
    const req = parse(VolumeUnpackRequest, raw);
    const { volumes, blobs, teamId } = this.deps;
    const have = await volumes.row(teamId, req.volume).catch(() => undefined);
    if (have && have.status === "READY") {
      if ((await volumes.get(teamId, have.id)).mounted_by.length > 0)
        throw new SandtreeError("VOLUME_IN_USE", `volume ${req.volume} is mounted here`, { volume: req.volume });
      await volumes.prepare(volumes.dirOf(have.id), have.size_gb);
      await unpackVolume(blobs, req.archive, volumes.dirOf(have.id), signal);
    } else {
      const fill = async (dir: string) => {
        await volumes.prepare(dir, req.size_gb);
        await unpackVolume(blobs, req.archive, dir, signal);
      };
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

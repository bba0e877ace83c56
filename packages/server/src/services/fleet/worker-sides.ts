import type { BlobStore, HostDisks } from "@sandtree/host";
import type { Store } from "../../store/store.js";
import type { ImageResolver } from "../images/image-resolver.js";
import type { VolumeService } from "../volumes/volume-service.js";
import { WorkerVolumes } from "../volumes/worker-volumes.js";
import { WorkerCheckpoints } from "./worker-checkpoints.js";

/** A worker's sides of its control plane's checkpoints and volume moves (services of a worker only). */
export function workerSides(o: {
  store: Store;
  blobs: BlobStore;
  images: ImageResolver;
  volumes: VolumeService;
  teamId: string;
  disks: HostDisks;
}): { workerCheckpoints: WorkerCheckpoints; workerVolumes: WorkerVolumes } {
  const { store, blobs, images, volumes, teamId, disks } = o;
  return {
    workerCheckpoints: new WorkerCheckpoints({ store, images, teamId, disks, layers: disks.layers(blobs) }),
    workerVolumes: new WorkerVolumes({ volumes, blobs, teamId }),
  };
}

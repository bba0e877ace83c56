import type { BlobStore, HostDisks } from "@sandtree/host";
import type { Store } from "../../store/store.js";
import type { ImageResolver } from "../images/image-resolver.js";
import { WorkerCheckpoints } from "./worker-checkpoints.js";

/** A worker's side of its control plane's checkpoints (services of a worker only). */
export function workerSides(o: { store: Store; blobs: BlobStore; images: ImageResolver; teamId: string; disks: HostDisks }): {
  workerCheckpoints: WorkerCheckpoints;
} {
  const { store, blobs, images, teamId, disks } = o;
  return {
    workerCheckpoints: new WorkerCheckpoints({ store, images, teamId, disks, layers: disks.layers(blobs) }),
  };
}

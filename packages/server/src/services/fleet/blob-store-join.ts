import { SandtreeError } from "@sandtree/protocol";
import { type BlobStoreSetting, BlobStoreUrl, s3Url, sameBlobStore } from "../../blob-store-config.js";

/**
 * What a joining worker is told about the object store, after checking its own setting: workers
 * store checkpoint layers in the control plane's bucket (the URL, never credentials), or, when the
 * control plane keeps layers in a local directory, each in its own data dir (null). A worker that
 * names another store is refused: its checkpoints would be where no other host looks.
 */
export function blobStoreForWorker(own: BlobStoreSetting | undefined, workerSetting: string | undefined): string | null {
  const ours = own?.kind === "s3" ? own : null;
  if (workerSetting !== undefined) {
    const parsed = BlobStoreUrl.safeParse(workerSetting);
    if (!parsed.success) {
      throw new SandtreeError("VALIDATION_FAILED", `blob_store: ${parsed.error.issues[0]?.message ?? "invalid"}`, {
        field: "blob_store",
      });
    }
    if (!ours) {
      throw new SandtreeError(
        "BLOB_STORE_MISMATCH",
        "the control plane keeps checkpoint layers in a local directory, so a worker keeps its own in its data dir: unset SANDTREE_BLOB_STORE on the worker",
        { control_plane: null },
      );
    }
    if (!sameBlobStore(parsed.data, ours)) {
      throw new SandtreeError(
        "BLOB_STORE_MISMATCH",
        `the worker's blob store is not the control plane's (${s3Url(ours)}): unset SANDTREE_BLOB_STORE on the worker, or set it to that`,
        { control_plane: s3Url(ours) },
      );
    }
  }
  return ours ? s3Url(ours) : null;
}

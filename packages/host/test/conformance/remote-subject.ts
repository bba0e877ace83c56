// The remote wrap both remote conformance files share: `local` served by a worker on loopback,
// reached through RemoteHost.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { BlobStore, MachineHost } from "../../src/index.js";
import { connectRemoteHost, type ServedHost, serveMachineHost } from "../../src/remote.js";

/**
 * RemoteHost -> the host service on loopback -> `local`, its layers port over `blobs` (the
 * worker's blob store); `beforeClose` runs on the worker first.
 */
export async function servedRemotely(
  local: MachineHost,
  blobs?: BlobStore,
  beforeClose: (worker: ServedHost) => Promise<void> = async () => {},
): Promise<{ host: MachineHost; close: () => Promise<void> }> {
  const key = "stw_conformance-key";
  const networksDir = mkdtempSync(path.join(tmpdir(), "sandtree-remote-nets-"));
  const worker = await serveMachineHost({ host: local, key: () => key, networksDir, ...(blobs ? { blobs } : {}) });
  const host = await connectRemoteHost({ url: worker.url, key });
  return {
    host,
    close: async () => {
      await beforeClose(worker);
      host.close();
      await worker.close();
      rmSync(networksDir, { recursive: true, force: true });
    },
  };
}

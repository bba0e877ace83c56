// The remote wrap both remote conformance files share: `local` served by a worker on loopback,
// reached through RemoteHost.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { MachineHost } from "../../src/index.js";
import { connectRemoteHost, type ServedHost, serveMachineHost } from "../../src/remote.js";

/** RemoteHost -> the host service on loopback -> `local`; `beforeClose` runs on the worker first. */
export async function servedRemotely(
  local: MachineHost,
  beforeClose: (worker: ServedHost) => Promise<void> = async () => {},
): Promise<{ host: MachineHost; close: () => Promise<void> }> {
  const key = "stw_conformance-key";
  const networksDir = mkdtempSync(path.join(tmpdir(), "sandtree-remote-nets-"));
  const worker = await serveMachineHost({ host: local, key: () => key, networksDir });
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

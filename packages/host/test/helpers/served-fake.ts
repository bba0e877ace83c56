import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { FakeHost } from "../../src/fake.js";
import { connectRemoteHost, type RemoteHost, type ServedHost, serveMachineHost } from "../../src/remote.js";

/** A FakeHost in a fresh directory, served as a worker's host over loopback, and a RemoteHost calling it. */
export interface ServedFake {
  dir: string;
  fake: FakeHost;
  worker: ServedHost;
  host: RemoteHost;
  /** Closes the client, then the worker, then removes the directory. */
  close(): Promise<void>;
}

/** `layoutMaxBytes`: the largest image import the worker takes (default: the service's). */
export async function serveFakeHost(prefix: string, key: () => string, o: { layoutMaxBytes?: number } = {}): Promise<ServedFake> {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  const fake = new FakeHost({ dir: path.join(dir, "host"), layersDir: dir });
  const worker = await serveMachineHost({ host: fake, key, networksDir: path.join(dir, "networks"), ...o });
  const host = await connectRemoteHost({ url: worker.url, key });
  return {
    dir,
    fake,
    worker,
    host,
    close: async () => {
      host.close();
      await worker.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// A fleet worker without a worker process: a FakeHost's host service on loopback, which answers
// the call key its registration gives (as `sandtree worker` serves its machine host). No VM.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { type BlobStore, type ServedHost, serveMachineHost } from "@sandtree/host";
import type { FakeHost } from "@sandtree/host/fake";
import type { RegisterHostResponse } from "@sandtree/protocol";
import { expect } from "vitest";
import type { RunningServer } from "../../src/server.js";
import { sha256Hex, workerCallKey } from "../../src/services/fleet/join-token.js";
import { type Api, jsonApi } from "../helpers.js";

/** A registration as a test sends it (an Api call): `extra` (the host's URL) added to its own body. */
export type Register = (extra: { host_url: string }) => ReturnType<Api>;

/** What a worker offers unless a test says (8 vCPUs, 16 GiB, 100 GiB of disk, TCG). */
export const WORKER_CAPACITY = { vcpus: 8, memory_mib: 16_384, disk_gib: 100, accel: "tcg" } as const;

/** The registration `sandtree worker` sends to the control plane at `url` with the join token. */
export function registerAt(url: string, token: string, name: string, capacity: object = WORKER_CAPACITY): Register {
  return (extra) => jsonApi(url, () => token)("POST", "/v1/fleet/hosts/register", { name, capacity, ...extra });
}

export interface FakeWorker {
  served: ServedHost;
  /** Its host id once joined. */
  hostId: string;
  /** Registers it through `register` (201 expected) and takes the call key the answer gives; the answer's body. */
  join(register: Register, joinToken: string): Promise<RegisterHostResponse>;
  /** Stops its service (its machines run on in the fake) and removes its directory; idempotent. */
  close(): Promise<void>;
}

/**
 * Serves `host(dir)`, a FakeHost made in a fresh directory (its networks beside it), as a worker's
 * host; `blobs` is its layers port's store (default: none).
 */
export async function serveFakeWorker(host: (dir: string) => FakeHost, o: { blobs?: BlobStore } = {}): Promise<FakeWorker> {
  const dir = mkdtempSync(path.join(tmpdir(), "sandtree-fake-worker-"));
  let key: string | null = null;
  const served = await serveMachineHost({
    host: host(dir),
    key: () => key,
    networksDir: path.join(dir, "networks"),
    ...(o.blobs ? { blobs: o.blobs } : {}),
  });
  let closed = false;
  const w: FakeWorker = {
    served,
    hostId: "",
    async join(register, joinToken) {
      const r = await register({ host_url: served.url });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      w.hostId = r.body.host_id;
      key = workerCallKey(joinToken, r.body.host_id, sha256Hex(r.body.secret));
      return r.body as RegisterHostResponse;
    },
    async close() {
      if (closed) return;
      closed = true;
      await served.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return w;
}

/** Waits until `server` opened the bundle of the host `name` (a worker that just joined). */
export async function bundleOpened(server: RunningServer, name: string): Promise<void> {
  await expect
    .poll(() => server.services.sandboxes.bundles.named(name) !== undefined, { timeout: 10_000, interval: 20 })
    .toBe(true);
}

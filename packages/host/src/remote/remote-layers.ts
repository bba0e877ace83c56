import type { Client } from "@connectrpc/connect";
import type { MachineHostService } from "../gen/sandtree/host/v1/host_pb.js";
import type { HostLayers, LayerDigest } from "../machine/host-layers.js";
import { remoteCall } from "./remote-errors.js";

/** A worker's layers port: the worker stores and fetches its own layers in its blob store. */
export class RemoteLayers implements HostLayers {
  constructor(private readonly client: Client<typeof MachineHostService>) {}

  store(key: string, opts: { signal?: AbortSignal } = {}): Promise<LayerDigest> {
    return remoteCall("storing a layer", async () => {
      const d = await this.client.storeLayer({ key }, opts);
      return { sha256: d.sha256, size: Number(d.size) };
    });
  }

  async fetch(key: string, sha256: string, opts: { signal?: AbortSignal } = {}): Promise<void> {
    await remoteCall("fetching a layer", () => this.client.fetchLayer({ key, sha256 }, opts));
  }
}

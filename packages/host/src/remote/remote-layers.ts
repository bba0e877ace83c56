import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import {
  type MachineHostService,
  ReplaceLayerHeaderSchema,
  type ReplaceLayerInput,
  ReplaceLayerInputSchema,
} from "../gen/sandtree/host/v1/host_pb.js";
import type { HostLayers, LayerDigest } from "../machine/host-layers.js";
import { AsyncQueue } from "../util/async-queue.js";
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

  /** The worker stores the layer, this side commits (asked between the worker's `stored` and its `done`). */
  readonly replace: HostLayers["replace"] = (key, from, digest, commit, opts = {}) =>
    remoteCall("replacing a layer", async () => {
      const inputs = new AsyncQueue<ReplaceLayerInput>();
      const send = (input: ReplaceLayerInput["input"]) => inputs.push(create(ReplaceLayerInputSchema, { input }));
      const header = create(ReplaceLayerHeaderSchema, {
        key,
        from,
        digest: { sha256: digest.sha256, size: BigInt(digest.size) },
      });
      send({ case: "header", value: header });
      try {
        for await (const o of this.client.replaceLayer(inputs, opts)) {
          if (o.output.case === "done") return o.output.value;
          if (o.output.case !== "stored") continue;
          let ok = false;
          try {
            ok = await commit();
          } finally {
            send({ case: "commit", value: ok });
          }
        }
      } finally {
        inputs.end();
      }
      throw new Error("the worker ended a layer replacement without its outcome");
    });

  async storeAs(key: string, from: string, sha256: string, opts: { signal?: AbortSignal } = {}): Promise<boolean> {
    return remoteCall("storing a layer", async () => (await this.client.storeLayerAs({ key, from, sha256 }, opts)).stored);
  }
}

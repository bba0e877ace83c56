import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { SandtreeError } from "@sandtree/protocol";
import {
  EmptySchema,
  LayerDigestSchema,
  type MachineHostService,
  type ReplaceLayerInput,
  type ReplaceLayerOutput,
  ReplaceLayerOutputSchema,
} from "../gen/sandtree/host/v1/host_pb.js";
import type { HostLayers } from "../machine/host-layers.js";
import type { HostDisks } from "../machine/machine.js";
import { answer, answerEmpty, toConnectError } from "./remote-errors.js";

type LayerCalls = Pick<
  ServiceImpl<typeof MachineHostService>,
  "storeLayer" | "fetchLayer" | "replaceLayer" | "storeLayerAs" | "hasLayer" | "removeLayer" | "listLayers"
>;

const sig = (ctx: HandlerContext) => ({ signal: ctx.signal });

/**
 * The worker's layers directory, by name (HostDisks), and its layers port (HostLayers; null: it
 * serves its host without a blob store, so it stores no layers: NOT_SUPPORTED).
 */
export function layerCalls(disks: HostDisks, layers: HostLayers | null): LayerCalls {
  const served = () => {
    if (!layers)
      throw new SandtreeError("NOT_SUPPORTED", "this worker serves its host without a blob store: it stores no layers");
    return layers;
  };
  return {
    storeLayer: (r, ctx) =>
      answer(async () => {
        const d = await served().store(r.key, sig(ctx));
        return create(LayerDigestSchema, { sha256: d.sha256, size: BigInt(d.size) });
      }),
    fetchLayer: (r, ctx) => answerEmpty(() => served().fetch(r.key, r.sha256, sig(ctx))),
    replaceLayer: (inputs, ctx) => replaceLayer(served, inputs, ctx),
    storeLayerAs: (r, ctx) => answer(async () => ({ stored: await served().storeAs(r.key, r.from, r.sha256, sig(ctx)) })),
    hasLayer: (r, ctx) => answer(async () => ({ present: await disks.hasLayer(r.name, sig(ctx)) })),
    removeLayer: (r, ctx) => answerEmpty(() => disks.removeLayer(r.name, sig(ctx))),
    listLayers: (r, ctx) => answer(async () => ({ names: await disks.listLayers(r.prefix, sig(ctx)) })),
  };
}

/**
 * HostLayers.replace with its commit asked of the client: `stored` once the blob store holds the
 * layer, then the client's `commit` decides (its stream ending without one: false).
 */
async function* replaceLayer(
  served: () => HostLayers,
  inputs: AsyncIterable<ReplaceLayerInput>,
  ctx: HandlerContext,
): AsyncIterable<ReplaceLayerOutput> {
  const out = (output: ReplaceLayerOutput["output"]) => create(ReplaceLayerOutputSchema, { output });
  try {
    const it = inputs[Symbol.asyncIterator]();
    const first = await it.next();
    const h = !first.done && first.value.input.case === "header" ? first.value.input.value : null;
    if (!h?.digest)
      throw new SandtreeError("VALIDATION_FAILED", "a layer replacement starts with its header", { field: "header" });
    const digest = { sha256: h.digest.sha256, size: Number(h.digest.size) };
    let stored = () => {};
    const asked = new Promise<"stored">((resolve) => {
      stored = () => resolve("stored");
    });
    let decide: (ok: boolean) => void = () => {};
    const decided = new Promise<boolean>((resolve) => {
      decide = resolve;
    });
    const done = served().replace(
      h.key,
      h.from,
      digest,
      () => {
        stored();
        return decided;
      },
      sig(ctx),
    );
    if ((await Promise.race([asked, done])) === "stored") {
      yield out({ case: "stored", value: create(EmptySchema) });
      let ok = false;
      try {
        const next = await it.next();
        ok = !next.done && next.value.input.case === "commit" && next.value.input.value;
      } finally {
        // A client gone before it answered: no commit (the replace removes the layer and ends).
        decide(ok);
      }
    }
    yield out({ case: "done", value: await done });
  } catch (err) {
    throw toConnectError(err);
  }
}

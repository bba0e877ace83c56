import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { SandtreeError } from "@sandtree/protocol";
import type { BlobStore } from "../blobs/blob-store.js";
import type { MachineHostService } from "../gen/sandtree/host/v1/host_pb.js";
import type { VolumeWriteInput } from "../gen/sandtree/host/v1/host_volumes_pb.js";
import type { HostVolumes } from "../volumes/host-volumes.js";
import { answer, answerEmpty, toConnectError } from "./remote-errors.js";

type VolumeCalls = Pick<
  ServiceImpl<typeof MachineHostService>,
  | "createVolume"
  | "openVolume"
  | "removeVolume"
  | "volumeUsage"
  | "snapshotVolume"
  | "volumeStat"
  | "volumeList"
  | "volumeRead"
  | "volumeWrite"
  | "volumeMkdir"
  | "volumeRemovePath"
  | "storeVolume"
  | "fetchVolume"
>;

const sig = (ctx: HandlerContext) => ({ signal: ctx.signal });

async function write(volumes: HostVolumes, inputs: AsyncIterable<VolumeWriteInput>, ctx: HandlerContext) {
  const it = inputs[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done || first.value.input.case !== "header")
    throw toConnectError(new Error("a volume write's first message names the file"));
  const h = first.value.input.value;
  async function* data(): AsyncIterable<Uint8Array> {
    for (;;) {
      const { value, done } = await it.next();
      if (done) return;
      if (value.input.case === "data") yield value.input.value;
    }
  }
  return answer(async () => {
    const w = await volumes.write(h.name, h.path, data(), {
      ...(h.mode !== undefined ? { mode: h.mode } : {}),
      limitBytes: Number(h.limitBytes),
      usedBytes: Number(h.usedBytes),
      signal: ctx.signal,
    });
    return { path: w.path, bytes: BigInt(w.bytes), replaced: BigInt(w.replaced) };
  });
}

/** The volumes port of the served host: its storage and files, and its archives over the worker's blob store. */
export function volumeCalls(volumes: HostVolumes, blobs: BlobStore | null): VolumeCalls {
  const archives = () => {
    if (!blobs) throw new SandtreeError("NOT_SUPPORTED", "this worker serves its host without a blob store: it packs no volumes");
    return volumes.archives(blobs);
  };
  return {
    createVolume: (r, ctx) => answerEmpty(() => volumes.create(r.name, r.sizeGb, sig(ctx))),
    openVolume: (r, ctx) => answerEmpty(() => volumes.open(r.name, sig(ctx))),
    removeVolume: (r, ctx) => answerEmpty(() => volumes.remove(r.name, sig(ctx))),
    volumeUsage: (r, ctx) => answer(async () => ({ bytes: BigInt(await volumes.usedBytes(r.name, sig(ctx))) })),
    snapshotVolume: (r, ctx) => answerEmpty(() => volumes.snapshot(r.source, r.name, r.sizeGb, sig(ctx))),
    volumeStat: (r, ctx) => answer(async () => ({ json: JSON.stringify(await volumes.stat(r.name, r.path, sig(ctx))) })),
    volumeList: (r, ctx) => answer(async () => ({ json: JSON.stringify(await volumes.list(r.name, r.path, sig(ctx))) })),
    volumeRead: (r, ctx) =>
      (async function* () {
        try {
          const opts = {
            ...(r.offset !== undefined ? { offset: Number(r.offset) } : {}),
            ...(r.length !== undefined ? { length: Number(r.length) } : {}),
            signal: ctx.signal,
          };
          const { size, chunks } = await volumes.read(r.name, r.path, opts);
          yield { output: { case: "size" as const, value: BigInt(size) } };
          for await (const data of chunks) yield { output: { case: "data" as const, value: data } };
        } catch (err) {
          throw toConnectError(err);
        }
      })(),
    volumeWrite: (inputs, ctx) => write(volumes, inputs, ctx),
    volumeMkdir: (r, ctx) =>
      answer(async () => ({
        json: JSON.stringify(await volumes.mkdir(r.name, r.path, { parents: r.parents, mode: r.mode, ...sig(ctx) })),
      })),
    volumeRemovePath: (r, ctx) => answerEmpty(() => volumes.removePath(r.name, r.path, { recursive: r.recursive, ...sig(ctx) })),
    storeVolume: (r, ctx) =>
      answer(async () => {
        const p = await archives().store(r.name, r.key, { snapshot: r.snapshot, sizeGb: r.sizeGb, ...sig(ctx) });
        return { key: p.key, sha256: p.sha256, size: BigInt(p.size) };
      }),
    fetchVolume: (r, ctx) =>
      answerEmpty(() => {
        const a = r.archive;
        if (!a) throw new SandtreeError("VALIDATION_FAILED", "a volume fetch names its archive", { field: "archive" });
        return archives().fetch({ key: a.key, sha256: a.sha256, size: Number(a.size) }, r.name, r.sizeGb, sig(ctx));
      }),
  };
}

import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { SandtreeError } from "@sandtree/protocol";
import type { BlobStore } from "../blobs/blob-store.js";
import type { MachineHostService } from "../gen/sandtree/host/v1/host_pb.js";
import type { VolumeWriteInput } from "../gen/sandtree/host/v1/host_volumes_pb.js";
import type { HostVolumes } from "../volumes/host-volumes.js";
import { fileOf, rangeOf } from "./file-msgs.js";
import { headedUpload } from "./headed-upload.js";
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
  const { header: h, data } = await headedUpload(inputs, "a volume write");
  return answer(async () => {
    const w = await volumes.write(h.name, h.path, data, {
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
          const f = fileOf(r.file, "file");
          const { size, chunks } = await volumes.read(r.name, f.path, { ...rangeOf(f), signal: ctx.signal });
          yield { output: { case: "size" as const, value: BigInt(size) } };
          for await (const data of chunks) yield { output: { case: "data" as const, value: data } };
        } catch (err) {
          throw toConnectError(err);
        }
      })(),
    volumeWrite: (inputs, ctx) => write(volumes, inputs, ctx),
    volumeMkdir: (r, ctx) =>
      answer(async () => {
        const d = fileOf(r.dir, "dir");
        // An absent mode is proto3's 0, as before the message was shared (the client always sends one).
        return {
          json: JSON.stringify(await volumes.mkdir(r.name, d.path, { parents: d.parents, mode: d.mode ?? 0, ...sig(ctx) })),
        };
      }),
    volumeRemovePath: (r, ctx) =>
      answerEmpty(() => {
        const f = fileOf(r.file, "file");
        return volumes.removePath(r.name, f.path, { recursive: f.recursive, ...sig(ctx) });
      }),
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

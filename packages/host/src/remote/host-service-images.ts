import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { SandtreeError } from "@sandtree/protocol";
import { x as tarExtract } from "tar";
import type { MachineHostService } from "../gen/sandtree/host/v1/host_pb.js";
import {
  type ImageRequest,
  type ImportLayoutInput,
  type ResolvedImage as ResolvedImageMsg,
  ResolvedImageSchema,
} from "../gen/sandtree/host/v1/host_resources_pb.js";
import { type HostImages, MachineRefusedError, type ResolvedImage } from "../machine/machine.js";
import { answer } from "./remote-errors.js";

type ImageCalls = Pick<ServiceImpl<typeof MachineHostService>, "resolveImage" | "checkImage" | "listImages" | "importLayout">;

function resolvedMsg(i: ResolvedImage): ResolvedImageMsg {
  return create(ResolvedImageSchema, { ...i, virtualSizeBytes: BigInt(i.virtualSizeBytes) });
}

/** The call's credentials (never logged: they go to the host's image store only) and its signal. */
function request(r: ImageRequest, ctx: HandlerContext) {
  return {
    ...(r.credentials ? { credentials: { username: r.credentials.username, password: r.credentials.password } } : {}),
    signal: ctx.signal,
  };
}

/** Unpacks the streamed tar of an OCI layout into a temporary directory, imports it, removes it. */
async function importLayout(images: HostImages, inputs: AsyncIterable<ImportLayoutInput>, ctx: HandlerContext) {
  const it = inputs[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done || first.value.input.case !== "header")
    throw new MachineRefusedError("an image import's first message names the image");
  const { name, layoutRef } = first.value.input.value;
  const dir = await mkdtemp(path.join(tmpdir(), "sandtree-layout-"));
  try {
    await unpackInto(dir, it, ctx.signal);
    return resolvedMsg(
      await images.importLayout(dir, name, { ...(layoutRef !== undefined ? { layoutRef } : {}), signal: ctx.signal }),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Writes the tar pieces that follow the header into `dir`: regular files and folders only, every path inside it. */
async function unpackInto(dir: string, it: AsyncIterator<ImportLayoutInput>, signal: AbortSignal): Promise<void> {
  const unpack = tarExtract({
    cwd: dir,
    strict: true,
    filter: (_p, e) => "type" in e && (e.type === "File" || e.type === "Directory"),
  });
  const unpacked = new Promise<void>((resolve, reject) => {
    unpack.on("close", () => resolve());
    unpack.on("error", reject);
  });
  // Awaited below, or dropped with the import when it fails first.
  unpacked.catch(() => {});
  try {
    for (;;) {
      const { value, done } = await it.next();
      if (done) break;
      if (value.input.case !== "tar") throw new MachineRefusedError("an image import sends its header once");
      if (!unpack.write(Buffer.from(value.input.value))) await once(unpack, "drain", { signal });
    }
    unpack.end();
    await unpacked;
  } catch (err) {
    unpack.abort(err instanceof Error ? err : new Error(String(err)));
    if (err instanceof MachineRefusedError || signal.aborted) throw err;
    throw new SandtreeError("IMAGE_INVALID", `the layout sent is not a readable tar: ${(err as Error).message}`);
  }
}

/** The images half of the MachineHostService (HostImages). */
export function imageCalls(images: HostImages): ImageCalls {
  return {
    resolveImage: (r, ctx) => answer(async () => resolvedMsg(await images.resolve(r.ref, request(r, ctx)))),
    checkImage: (r, ctx) =>
      answer(async () => {
        await images.check(r.ref, request(r, ctx));
        return {};
      }),
    listImages: () =>
      answer(async () => ({
        images: (await images.list()).map((i) => ({
          ref: i.ref,
          digest: i.digest,
          source: i.source,
          virtualSizeBytes: BigInt(i.virtualSizeBytes),
          ...(i.createdAt ? { createdAt: i.createdAt } : {}),
        })),
      })),
    importLayout: (inputs, ctx) => answer(() => importLayout(images, inputs, ctx)),
  };
}

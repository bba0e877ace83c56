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

/** The most bytes an image import may send or unpack, unless the worker is given another cap (ServeHostOptions.layoutMaxBytes). */
export const LAYOUT_MAX_BYTES = 8 * 1024 ** 3;

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

/** Unpacks the streamed tar of an OCI layout (at most `maxBytes`) into a temporary directory, imports it, removes it. */
async function importLayout(images: HostImages, inputs: AsyncIterable<ImportLayoutInput>, maxBytes: number, ctx: HandlerContext) {
  const it = inputs[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done || first.value.input.case !== "header")
    throw new MachineRefusedError("an image import's first message names the image");
  const { name, layoutRef } = first.value.input.value;
  const dir = await mkdtemp(path.join(tmpdir(), "sandtree-layout-"));
  try {
    await unpackInto(dir, it, maxBytes, ctx.signal);
    return resolvedMsg(
      await images.importLayout(dir, name, { ...(layoutRef !== undefined ? { layoutRef } : {}), signal: ctx.signal }),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Writes the tar pieces that follow the header into `dir`: regular files and folders only, every
 * path inside it; PAYLOAD_TOO_LARGE once the bytes sent, or the sizes its files declare (a
 * compressed tar unpacks larger than it is sent), pass `maxBytes`.
 */
async function unpackInto(
  dir: string,
  it: AsyncIterator<ImportLayoutInput>,
  maxBytes: number,
  signal: AbortSignal,
): Promise<void> {
  let unpacked = 0;
  let sent = 0;
  const unpack = tarExtract({
    cwd: dir,
    strict: true,
    filter: (_p, e) => {
      if (!("type" in e && (e.type === "File" || e.type === "Directory"))) return false;
      unpacked += e.size ?? 0;
      // Refused before its bytes are written; the loop below sees the count and stops the import.
      return unpacked <= maxBytes;
    },
  });
  const refuseTooLarge = () => {
    if (sent > maxBytes || unpacked > maxBytes)
      throw new SandtreeError("PAYLOAD_TOO_LARGE", `an image import is larger than this worker takes (${maxBytes} bytes)`, {
        max_bytes: maxBytes,
      });
  };
  const done = new Promise<void>((resolve, reject) => {
    unpack.on("close", () => resolve());
    unpack.on("error", reject);
  });
  // Awaited below, or dropped with the import when it fails first.
  done.catch(() => {});
  try {
    for (;;) {
      const { value, done } = await it.next();
      if (done) break;
      if (value.input.case !== "tar") throw new MachineRefusedError("an image import sends its header once");
      sent += value.input.value.length;
      refuseTooLarge();
      const drained = unpack.write(Buffer.from(value.input.value));
      refuseTooLarge();
      if (!drained) await once(unpack, "drain", { signal });
    }
    unpack.end();
    await done;
    refuseTooLarge();
  } catch (err) {
    unpack.abort(err instanceof Error ? err : new Error(String(err)));
    if (err instanceof MachineRefusedError || err instanceof SandtreeError || signal.aborted) throw err;
    throw new SandtreeError("IMAGE_INVALID", `the layout sent is not a readable tar: ${(err as Error).message}`);
  }
}

/** The images half of the MachineHostService (HostImages). */
export function imageCalls(images: HostImages, layoutMaxBytes: number): ImageCalls {
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
    importLayout: (inputs, ctx) => answer(() => importLayout(images, inputs, layoutMaxBytes, ctx)),
  };
}

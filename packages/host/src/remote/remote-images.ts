import { access } from "node:fs/promises";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { SandtreeError } from "@sandtree/protocol";
import { c as tarCreate } from "tar";
import type { MachineHostService } from "../gen/sandtree/host/v1/host_pb.js";
import {
  type ImportLayoutInput,
  ImportLayoutInputSchema,
  type ResolvedImage as ResolvedImageMsg,
} from "../gen/sandtree/host/v1/host_resources_pb.js";
import type { HostImages, ImageRequest, ImageSummary, ResolvedImage } from "../machine/machine.js";
import { fromConnectError, remoteCall } from "./remote-errors.js";

/** Tar pieces are sent in messages of about this size. */
const PIECE = 256 * 1024;

/** A remote host's images: built on the worker, their base paths the worker's (for its LinkBase). */
export class RemoteImages implements HostImages {
  constructor(private readonly client: Client<typeof MachineHostService>) {}

  private call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    return remoteCall(what, fn);
  }

  resolve(ref: string, opts: ImageRequest): Promise<ResolvedImage> {
    return this.call(`resolving image ${ref}`, async () =>
      resolvedImage(await this.client.resolveImage(imageRequest(ref, opts), signalOf(opts))),
    );
  }

  async check(ref: string, opts: ImageRequest): Promise<void> {
    await this.call(`checking image ${ref}`, () => this.client.checkImage(imageRequest(ref, opts), signalOf(opts)));
  }

  list(): Promise<ImageSummary[]> {
    return this.call("listing images", async () =>
      (await this.client.listImages({})).images.map((i) => ({
        ref: i.ref,
        digest: i.digest,
        source: sourceOf(i.source),
        virtualSizeBytes: Number(i.virtualSizeBytes),
        createdAt: i.createdAt ?? null,
      })),
    );
  }

  /** Sends the layout directory (read here) to the worker as a tar; the worker builds the image. */
  async importLayout(dir: string, name: string, opts: { layoutRef?: string; signal?: AbortSignal }): Promise<ResolvedImage> {
    // What the store would answer of a folder that is no layout, before anything is sent.
    await access(path.join(dir, "oci-layout")).catch(() => {
      throw new SandtreeError("IMAGE_NOT_FOUND", `${dir} is not an OCI image layout`, { layout: dir });
    });
    let readError: unknown;
    async function* inputs(): AsyncIterable<ImportLayoutInput> {
      const header = { name, ...(opts.layoutRef !== undefined ? { layoutRef: opts.layoutRef } : {}) };
      yield create(ImportLayoutInputSchema, { input: { case: "header", value: header } });
      try {
        for await (const piece of pieces(tarCreate({ cwd: dir, portable: true }, ["."])))
          yield create(ImportLayoutInputSchema, { input: { case: "tar", value: piece } });
      } catch (err) {
        readError = err;
        throw err;
      }
    }
    try {
      return resolvedImage(await this.client.importLayout(inputs(), signalOf(opts)));
    } catch (err) {
      if (readError !== undefined)
        throw new SandtreeError("IMAGE_INVALID", `cannot read the OCI layout ${dir}: ${(readError as Error).message}`, {
          layout: dir,
        });
      throw fromConnectError(err, `importing ${dir} as ${name}`);
    }
  }
}

/** The tar's small blocks gathered into pieces of about PIECE bytes. */
async function* pieces(tar: AsyncIterable<Buffer>): AsyncIterable<Buffer> {
  let held: Buffer[] = [];
  let size = 0;
  for await (const block of tar) {
    held.push(block);
    size += block.length;
    if (size >= PIECE) {
      yield Buffer.concat(held);
      held = [];
      size = 0;
    }
  }
  if (size > 0) yield Buffer.concat(held);
}

function signalOf(opts: { signal?: AbortSignal }): { signal?: AbortSignal } {
  return opts.signal ? { signal: opts.signal } : {};
}

function imageRequest(ref: string, opts: ImageRequest) {
  return { ref, ...(opts.credentials ? { credentials: opts.credentials } : {}) };
}

function sourceOf(s: string): "local" | "registry" {
  return s === "registry" ? "registry" : "local";
}

function resolvedImage(m: ResolvedImageMsg): ResolvedImage {
  return {
    ref: m.ref,
    digest: m.digest,
    base: m.base,
    virtualSizeBytes: Number(m.virtualSizeBytes),
    source: sourceOf(m.source),
    labels: { ...m.labels },
  };
}

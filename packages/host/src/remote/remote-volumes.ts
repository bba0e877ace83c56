import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import type { FileList, FileStat, PackedVolume } from "@sandtree/protocol";
import type { MachineHostService } from "../gen/sandtree/host/v1/host_pb.js";
import { type VolumeWriteInput, VolumeWriteInputSchema } from "../gen/sandtree/host/v1/host_volumes_pb.js";
import type { HostVolumes, VolumeArchives, VolumeRead, VolumeWrite, VolumeWritten } from "../volumes/host-volumes.js";
import { fileRead } from "./file-msgs.js";
import { fromConnectError, remoteCall } from "./remote-errors.js";

type Sig = { signal?: AbortSignal };
const callOpts = (o: Sig | undefined) => (o?.signal ? { signal: o.signal } : {});

/**
 * A worker's volumes port: its volumes live in its own volumes directory and are made, filled,
 * read and packed there (reads and writes streamed as a machine's files are: ReadFile, WriteFile).
 */
export class RemoteVolumes implements HostVolumes {
  private readonly archivePort: VolumeArchives;

  constructor(private readonly client: Client<typeof MachineHostService>) {
    this.archivePort = {
      store: (name, key, o = {}) =>
        remoteCall("packing a volume", async () => {
          const req = { name, key, snapshot: o.snapshot ?? false, sizeGb: o.sizeGb ?? 0 };
          const p = await this.client.storeVolume(req, callOpts(o));
          return { key: p.key, sha256: p.sha256, size: Number(p.size) };
        }),
      fetch: async (archive: PackedVolume, name, sizeGb, o = {}) => {
        const a = { key: archive.key, sha256: archive.sha256, size: BigInt(archive.size) };
        await remoteCall("unpacking a volume", () => this.client.fetchVolume({ archive: a, name, sizeGb }, callOpts(o)));
      },
    };
  }

  async create(name: string, sizeGb: number, o?: Sig): Promise<void> {
    await remoteCall("creating a volume", () => this.client.createVolume({ name, sizeGb }, callOpts(o)));
  }

  async open(name: string, o?: Sig): Promise<void> {
    await remoteCall("opening a volume", () => this.client.openVolume({ name }, callOpts(o)));
  }

  async remove(name: string, o?: Sig): Promise<void> {
    await remoteCall("removing a volume", () => this.client.removeVolume({ name }, callOpts(o)));
  }

  usedBytes(name: string, o?: Sig): Promise<number> {
    return remoteCall("measuring a volume", async () => Number((await this.client.volumeUsage({ name }, callOpts(o))).bytes));
  }

  async snapshot(source: string, name: string, sizeGb: number, o?: Sig): Promise<void> {
    await remoteCall("snapshotting a volume", () => this.client.snapshotVolume({ source, name, sizeGb }, callOpts(o)));
  }

  stat(name: string, path: string, o?: Sig): Promise<FileStat> {
    return remoteCall("reading a volume's file", async () =>
      JSON.parse((await this.client.volumeStat({ name, path }, callOpts(o))).json),
    );
  }

  list(name: string, path: string, o?: Sig): Promise<FileList> {
    return remoteCall("listing a volume's folder", async () =>
      JSON.parse((await this.client.volumeList({ name, path }, callOpts(o))).json),
    );
  }

  /** The size arrives first (or the error of a file that cannot be read), the bytes after it. */
  async read(name: string, path: string, o: Sig & { offset?: number; length?: number } = {}): Promise<VolumeRead> {
    const it = this.client.volumeRead({ name, file: fileRead(path, o) }, callOpts(o))[Symbol.asyncIterator]();
    const first = await remoteCall("reading a volume's file", () => it.next());
    if (first.done || first.value.output.case !== "size") throw new Error("a volume read's first message is its size");
    const size = Number(first.value.output.value);
    async function* chunks(): AsyncIterable<Uint8Array> {
      try {
        for (;;) {
          const { value, done } = await it.next();
          if (done) return;
          if (value.output.case === "data") yield value.output.value;
        }
      } catch (err) {
        throw fromConnectError(err, "reading a volume's file");
      } finally {
        await it.return?.();
      }
    }
    return { size, chunks: chunks() };
  }

  write(name: string, path: string, body: AsyncIterable<Uint8Array>, o: VolumeWrite): Promise<VolumeWritten> {
    async function* inputs(): AsyncIterable<VolumeWriteInput> {
      const header = {
        name,
        path,
        ...(o.mode !== undefined ? { mode: o.mode } : {}),
        limitBytes: BigInt(o.limitBytes),
        usedBytes: BigInt(o.usedBytes),
      };
      yield create(VolumeWriteInputSchema, { input: { case: "header", value: header } });
      for await (const data of body) yield create(VolumeWriteInputSchema, { input: { case: "data", value: data } });
    }
    return remoteCall("writing a volume's file", async () => {
      const w = await this.client.volumeWrite(inputs(), callOpts(o));
      return { path: w.path, bytes: Number(w.bytes), replaced: Number(w.replaced) };
    });
  }

  mkdir(name: string, path: string, o: Sig & { parents: boolean; mode: number }): Promise<FileStat> {
    return remoteCall("making a volume's folder", async () =>
      JSON.parse((await this.client.volumeMkdir({ name, dir: { path, parents: o.parents, mode: o.mode } }, callOpts(o))).json),
    );
  }

  async removePath(name: string, path: string, o: Sig & { recursive: boolean }): Promise<void> {
    await remoteCall("removing a volume's file", () =>
      this.client.volumeRemovePath({ name, file: { path, recursive: o.recursive } }, callOpts(o)),
    );
  }

  /** The worker's archives, packed into and unpacked from its own blob store (the fleet's): `blobs` is the caller's. */
  archives(): VolumeArchives {
    return this.archivePort;
  }
}

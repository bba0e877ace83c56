import { setMaxListeners } from "node:events";
import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { MachineHostService } from "../gen/sandtree/host/v1/host_pb.js";
import type { ConsoleTail } from "../machine/console-tail.js";
import type { HostLayers } from "../machine/host-layers.js";
import type { AdoptSpec, HostCapabilities, HostImages, MachineHost, MachineSpec, WarmCaches } from "../machine/machine.js";
import { fromConnectError, remoteCall } from "./remote-errors.js";
import { RemoteImages } from "./remote-images.js";
import { RemoteLayers } from "./remote-layers.js";
import { RemoteMachine } from "./remote-machine.js";
import { RemoteNetworks } from "./remote-networks.js";
import { adoptRequest, startRequest } from "./remote-specs.js";
import { RemoteVolumes } from "./remote-volumes.js";

export interface RemoteHostOptions {
  /** The worker's host service (`sandtree worker --serve-host`'s URL: http://ADDR:PORT). */
  url: string;
  /** The worker's call key (the control plane derives it from the join token and the host's secret). */
  key: string | (() => string);
}

/**
 * A MachineHost on another machine: each call goes to a worker serving its own host (QEMU's, or a
 * fake) with serveMachineHost. Disks, layers and memory states are named in the worker's layers
 * directory (never a path of this machine's); the worker chooses its machines' own directories
 * (their names say which). No warm caches here:
 * the worker's templates and memory images are its own affair (warmCaches answers null).
 */
export class RemoteHost implements MachineHost {
  private readonly life = new AbortController();
  /** The worker's images: resolved and built there (an import sends the layout over). */
  readonly images: HostImages;
  /** The worker's sandbox networks (its taps, rules, resolver and tunnels), its state kept there. */
  readonly networks: RemoteNetworks;
  private readonly layerPort: RemoteLayers;
  /** The worker's volumes: made, filled and packed in its own volumes directory. */
  readonly volumes: RemoteVolumes;

  private constructor(
    private readonly client: Client<typeof MachineHostService>,
    private readonly sessions: Http2SessionManager,
    private caps: HostCapabilities,
  ) {
    // Every machine's watch and every command listen on it: as many as run at once.
    setMaxListeners(0, this.life.signal);
    this.images = new RemoteImages(client);
    // Volumes come with the worker's networks (its file server opens with them): asked again once they opened.
    this.networks = new RemoteNetworks(client, async () => {
      this.caps = await this.call("asking what the host can do", () => capabilitiesOf(client));
    });
    this.layerPort = new RemoteLayers(client);
    this.volumes = new RemoteVolumes(client);
  }

  /** Connects and asks the worker what its host can do (the one call before the host is usable). */
  static async connect(o: RemoteHostOptions): Promise<RemoteHost> {
    const key = typeof o.key === "string" ? () => o.key as string : o.key;
    const auth: Interceptor = (next) => (req) => {
      req.header.set("authorization", `Bearer ${key()}`);
      return next(req);
    };
    const sessions = new Http2SessionManager(o.url, { pingIntervalMs: 10_000, pingTimeoutMs: 10_000 });
    const transport = createConnectTransport({
      baseUrl: o.url,
      httpVersion: "2",
      sessionManager: sessions,
      interceptors: [auth],
    });
    const client = createClient(MachineHostService, transport);
    try {
      return new RemoteHost(client, sessions, await capabilitiesOf(client));
    } catch (err) {
      sessions.abort();
      throw fromConnectError(err, "connecting to the remote host");
    }
  }

  /** What the worker's host can do: asked at connect, and again once its networks opened. */
  get capabilities(): HostCapabilities {
    return this.caps;
  }

  private call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    return remoteCall(what, fn);
  }

  warmCaches(): WarmCaches | null {
    return null;
  }

  linkBase(base: string): Promise<string> {
    return this.call("linking an image base", async () => (await this.client.linkBase({ base })).name);
  }

  async createDisk(backing: string, disk: string, sizeBytes: number, opts: { signal?: AbortSignal } = {}): Promise<void> {
    await this.call("creating a disk", () => this.client.createDisk({ backing, disk, sizeBytes: BigInt(sizeBytes) }, opts));
  }

  /** The worker's layers, stored in and fetched from its own blob store (the fleet's): `blobs` is the caller's. */
  layers(): HostLayers {
    return this.layerPort;
  }

  hasLayer(name: string, opts: { signal?: AbortSignal } = {}): Promise<boolean> {
    return this.call("looking for a layer", async () => (await this.client.hasLayer({ name }, opts)).present);
  }

  async removeLayer(name: string, opts: { signal?: AbortSignal } = {}): Promise<void> {
    await this.call("removing a layer", () => this.client.removeLayer({ name }, opts));
  }

  listLayers(prefix: string, opts: { signal?: AbortSignal } = {}): Promise<string[]> {
    return this.call("listing layers", async () => (await this.client.listLayers({ prefix }, opts)).names);
  }

  readonly flattenLayer: MachineHost["flattenLayer"] = (layer, backing, dest, opts = {}) =>
    this.call("flattening a layer", async () => layerDigest(await this.client.flattenLayer({ layer, backing, dest }, opts)));

  async start(spec: MachineSpec): Promise<RemoteMachine> {
    const req = startRequest(spec);
    const info = await this.call("starting a machine", () => this.client.start(req, spec.signal ? { signal: spec.signal } : {}));
    return new RemoteMachine(this.client, info, this.life.signal);
  }

  async adopt(spec: AdoptSpec): Promise<RemoteMachine> {
    const info = await this.call("adopting a machine", () =>
      this.client.adopt(adoptRequest(spec), spec.signal ? { signal: spec.signal } : {}),
    );
    return new RemoteMachine(this.client, info, this.life.signal);
  }

  survivors(): Promise<Array<{ name: string; pid: number }>> {
    return this.call("listing surviving machines", async () =>
      (await this.client.survivors({})).survivors.map((s) => ({ name: s.name, pid: s.pid })),
    );
  }

  killSurvivor(pid: number, name: string): void {
    this.client.killSurvivor({ pid, name }).catch(() => {});
  }

  consoleTail(name: string, bytes: number, opts: { signal?: AbortSignal } = {}): Promise<ConsoleTail> {
    return this.call("reading a console log", async () => {
      const t = await this.client.consoleTail({ machine: name, bytes }, opts);
      return { text: t.text, size: Number(t.size) };
    });
  }

  discard(name: string, opts: { signal?: AbortSignal } = {}): Promise<void> {
    return this.call("removing a machine's run directory", async () => {
      await this.client.discard({ name }, opts);
    });
  }

  /** Ends this client's calls and its connection; the worker's machines run on. Idempotent. */
  close(): void {
    this.life.abort();
    this.sessions.abort();
  }
}

/** A MachineHost that calls a worker's host service (see serveMachineHost). */
export function connectRemoteHost(o: RemoteHostOptions): Promise<RemoteHost> {
  return RemoteHost.connect(o);
}

/** A layer's digest and size as the host service answers them (size a bigint on the wire). */
function layerDigest(d: { sha256: string; size: bigint }): { sha256: string; size: number } {
  return { sha256: d.sha256, size: Number(d.size) };
}

async function capabilitiesOf(client: Client<typeof MachineHostService>): Promise<HostCapabilities> {
  const c = await client.capabilities({}, { timeoutMs: 30_000 });
  const nested: HostCapabilities["nested"] = c.nestedOk ? { ok: true } : { ok: false, why: c.nestedWhy };
  const volumes: HostCapabilities["volumes"] = c.volumesOk ? { ok: true } : { ok: false, why: c.volumesWhy };
  return { accel: c.accel, memorySnapshots: c.memorySnapshots, nested, volumes };
}

import { createHash, timingSafeEqual } from "node:crypto";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { BlobStore } from "../blobs/blob-store.js";
import { MachineHostService } from "../gen/sandtree/host/v1/host_pb.js";
import type { MachineHost } from "../machine/machine.js";
import { machineHostService, ServedMachines } from "./host-service.js";
import { LAYOUT_MAX_BYTES } from "./host-service-images.js";

export interface ServeHostOptions {
  host: MachineHost;
  /** Where to listen (default 127.0.0.1, a free port). */
  listenHost?: string;
  port?: number;
  /**
   * The key a caller must send as `Authorization: Bearer KEY`: a fleet worker's call key (derived
   * from the join token and its host secret), read on every call since it changes when the worker
   * registers again. Null: no caller is let in yet.
   */
  key: () => string | null;
  /**
   * The worker's own state directory for its sandbox networks (the pool it chose, what it changed
   * of the host): what OpenNetworks opens them in, whatever data dir the caller has. A fleet
   * worker's is `<its data dir>/host-networks`.
   */
  networksDir: string;
  /**
   * The blob store its layers port stores into and fetches from (the worker's: its `localDir` is
   * the worker's layers directory). Without it, StoreLayer and FetchLayer answer NOT_SUPPORTED.
   */
  blobs?: BlobStore;
  /** The largest message a client may send (bytes; default 16 MiB: file chunks are far smaller). */
  readMaxBytes?: number;
  /** The most bytes an image import may send or unpack (default LAYOUT_MAX_BYTES, 8 GiB); past it PAYLOAD_TOO_LARGE. */
  layoutMaxBytes?: number;
}

export interface ServedHost {
  /** The URL a RemoteHost connects to (http://ADDR:PORT; HTTP/2 without TLS). */
  url: string;
  /** Stops listening and ends every call in flight; machines started through it run on (a host's machines outlive its server). Idempotent. */
  close(): Promise<void>;
  /** The machines it started or adopted and still serves. */
  readonly served: ServedMachines;
}

function sameKey(given: string, expected: string): boolean {
  const h = (s: string) => createHash("sha256").update(s).digest();
  return timingSafeEqual(h(given), h(expected));
}

function authenticate(key: () => string | null): Interceptor {
  return (next) => async (req) => {
    const m = /^Bearer\s+(\S+)$/i.exec(req.header.get("authorization") ?? "");
    const expected = key();
    if (!m?.[1] || expected === null || !sameKey(m[1], expected)) {
      throw new ConnectError("this host takes calls only with the fleet's worker key", Code.Unauthenticated);
    }
    return next(req);
  };
}

/** How long a closing host service lets its streams under way end before it cuts them. */
const CLOSE_GRACE_MS = 2000;

/**
 * Serves a MachineHost over the network (Connect-RPC over HTTP/2 cleartext, the MachineHostService
 * of proto/sandtree/host/v1/host.proto): what `sandtree worker --serve-host` runs beside its API.
 */
export async function serveMachineHost(o: ServeHostOptions): Promise<ServedHost> {
  const served = new ServedMachines();
  const handler = connectNodeAdapter({
    routes: (router) =>
      router.service(
        MachineHostService,
        machineHostService(o.host, served, {
          networksDir: o.networksDir,
          blobs: o.blobs ?? null,
          layoutMaxBytes: o.layoutMaxBytes ?? LAYOUT_MAX_BYTES,
        }),
      ),
    interceptors: [authenticate(o.key)],
    readMaxBytes: o.readMaxBytes ?? 16 * 1024 * 1024,
  });
  const server = http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port ?? 0, o.listenHost ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${host}:${addr.port}`,
    served,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Streams under way end first (a machine's exit reaches its watcher); cut after a deadline.
        for (const s of sessions) s.close();
        setTimeout(() => {
          for (const s of sessions) s.destroy();
        }, CLOSE_GRACE_MS).unref();
      });
      return closing;
    },
  };
}

import type { DescService } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  type ContextKey,
  createContextKey,
  createContextValues,
  type Interceptor,
} from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance, FastifyRequest } from "fastify";

/**
 * The one Connect-RPC engine of the server: the E2B daemon protocol (JSON codec) and Prime's
 * command session (binary protobuf) are Connect services mounted through here, on the server's own
 * port, by @connectrpc/connect-node (framing, codecs, streams, errors and deadlines are the
 * library's, not ours).
 *
 * A mount names a URL prefix (fastify's syntax: it may hold parameters, e.g. a gateway's
 * `/prime/gw/:ns/:job`), the services under it, and how a request becomes the handlers' context
 * (authentication). Each method gets its own POST route, so REST routes may share the prefix
 * (E2B's control plane does).
 */
export interface ConnectMount<C> {
  prefix: string;
  services: readonly DescService[];
  /** Registers the services' implementations (`router.service(desc, impl)` for each). */
  routes(router: ConnectRouter): void;
  /** The handlers' context of a request: who calls, on which sandbox. Throws to refuse it. */
  context(req: FastifyRequest): Promise<C>;
  /** The largest message a client may send (bytes). Default 16 MiB. */
  readMaxBytes?: number;
}

/** How a handler reads its mount's context: `ctx.values.get(key)` (set on every call). */
export type ConnectContextKey<C> = ContextKey<C>;

interface Tagged {
  sandtreeConnect?: { context?: unknown; refused?: unknown };
}

const REFUSED = createContextKey<unknown>(undefined, { description: "sandtree.connect.refused" });

/** A key for a mount's context; `fallback` is what a refused call's handlers would see (never run). */
export function connectContextKey<C>(name: string, fallback: C): ConnectContextKey<C> {
  return createContextKey<C>(fallback, { description: name });
}

/** The Connect code of one of sandtree's errors, by its HTTP status (one table, as the REST API). */
export function connectCode(status: number): Code {
  if (status === 400 || status === 422) return Code.InvalidArgument;
  if (status === 401) return Code.Unauthenticated;
  if (status === 402 || status === 403) return Code.PermissionDenied;
  if (status === 404) return Code.NotFound;
  if (status === 409) return Code.FailedPrecondition;
  if (status === 413 || status === 429) return Code.ResourceExhausted;
  if (status === 501) return Code.Unimplemented;
  if (status === 503) return Code.Unavailable;
  if (status === 504) return Code.DeadlineExceeded;
  return Code.Internal;
}

/** A thrown error as the client will see it; sandtree's code rides along as the message's prefix. */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof SandtreeError) return new ConnectError(`${err.code}: ${err.message}`, connectCode(err.status));
  return new ConnectError("internal error", Code.Internal, undefined, undefined, err);
}

/** Refusals found before the handler (authentication) and errors thrown inside it, as Connect errors. */
const sandtreeErrors: Interceptor = (next) => async (req) => {
  const refused = req.contextValues.get(REFUSED);
  if (refused !== undefined) throw toConnectError(refused);
  try {
    const res = await next(req);
    if (!res.stream) return res;
    // A server stream's errors surface while it is read: map them as they pass.
    const message = res.message;
    return {
      ...res,
      message: (async function* () {
        try {
          yield* message;
        } catch (err) {
          throw toConnectError(err);
        }
      })(),
    };
  } catch (err) {
    throw toConnectError(err);
  }
};

/**
 * Mounts `mount` into `app` in its own encapsulated scope (request bodies reach the library
 * unread) and returns the routes' URLs, for the API's documentation.
 */
export function mountConnect<C>(app: FastifyInstance, key: ConnectContextKey<C>, mount: ConnectMount<C>): string[] {
  const prefix = mount.prefix.replace(/\/+$/, "");
  const urls: string[] = [];
  const handler = connectNodeAdapter({
    routes: mount.routes,
    readMaxBytes: mount.readMaxBytes ?? 16 * 1024 * 1024,
    interceptors: [sandtreeErrors],
    contextValues: (req) => {
      const values = createContextValues();
      const tag = (req as unknown as Tagged).sandtreeConnect;
      if (tag?.refused !== undefined) values.set(REFUSED, tag.refused);
      else if (tag) values.set(key, tag.context as C);
      return values;
    },
  });
  app.register(async (scope) => {
    // Connect reads its own bodies (unary JSON too): nothing here parses one.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", (_req, payload, done) => done(null, payload));
    for (const service of mount.services) {
      for (const method of service.methods) {
        const rpcPath = `/${service.typeName}/${method.name}`;
        const url = `${prefix}${rpcPath}`;
        urls.push(url);
        const types = acceptedTypes(method.methodKind);
        scope.post(url, async (req, reply) => {
          // Anything but an RPC (a browser, a fuzzer, a wrong client) gets sandtree's error shape;
          // the library would answer a bare 415.
          const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
          if (!types.has(type)) {
            throw new SandtreeError(
              "UNSUPPORTED_MEDIA_TYPE",
              `${url} is a Connect-RPC method: send ${[...types].slice(0, 2).join(" or ")} (or gRPC, gRPC-web)`,
            );
          }
          const raw = req.raw as typeof req.raw & Tagged;
          try {
            raw.sandtreeConnect = { context: await mount.context(req) };
          } catch (err) {
            raw.sandtreeConnect = { refused: err };
          }
          reply.hijack();
          // The library routes on the RPC's own path, whatever the mount's prefix was.
          raw.url = rpcPath;
          await new Promise<void>((resolve) => {
            reply.raw.once("close", resolve);
            handler(raw, reply.raw);
          });
        });
      }
    }
  });
  return urls;
}

/** The content types of the protocols the library serves (Connect, gRPC, gRPC-web) for a kind of method. */
function acceptedTypes(kind: string): Set<string> {
  const grpc = ["application/grpc", "application/grpc+proto", "application/grpc+json"];
  const grpcWeb = ["application/grpc-web", "application/grpc-web+proto", "application/grpc-web+json"];
  const connect =
    kind === "unary" ? ["application/json", "application/proto"] : ["application/connect+json", "application/connect+proto"];
  return new Set([...connect, ...grpc, ...grpcWeb]);
}

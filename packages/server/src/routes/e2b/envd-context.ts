import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { SandtreeError } from "@sandtree/protocol";
import type { FastifyRequest } from "fastify";
import { type ConnectContextKey, connectContextKey } from "../../connect/engine.js";
import type { Services } from "../../services/services.js";
import { authenticateSandbox } from "./e2b-auth.js";

/** Who calls the daemon RPCs, on which sandbox, as which guest user (none: the image's default). */
export interface EnvdCaller {
  teamId: string;
  sandboxId: string;
  user?: string;
}

export const ENVD_CALLER: ConnectContextKey<EnvdCaller> = connectContextKey("sandtree.e2b.envd", {
  teamId: "",
  sandboxId: "",
});

/** The user the SDK names: `Authorization: Basic base64(user:)` on RPCs, `?username=` on /files. */
export function userFrom(authorization: string | undefined): string | undefined {
  const m = authorization ? /^Basic\s+(\S+)$/i.exec(authorization) : null;
  if (!m?.[1]) return undefined;
  const user = Buffer.from(m[1], "base64").toString("utf8").split(":")[0];
  return user || undefined;
}

/** The daemon's caller of a request: the sandbox's token decides; each call counts as activity. */
export async function envdCaller(req: FastifyRequest, s: Services): Promise<EnvdCaller> {
  const sandboxId = await authenticateSandbox(req, s);
  await s.timeouts.touch(req.principal.teamId, sandboxId);
  const user = userFrom(req.headers.authorization);
  return { teamId: req.principal.teamId, sandboxId, ...(user ? { user } : {}) };
}

/** File operations run as root in sandtree: another user is refused, never silently ignored. */
export function rootOnly(user: string | undefined): void {
  if (user !== undefined && user !== "root") {
    throw new SandtreeError(
      "NOT_SUPPORTED",
      `file operations as user ${user}: sandtree's file API acts as root (omit user, or pass 'root')`,
    );
  }
}

/** The codes the SDK branches on where sandtree's status table says otherwise. */
export function envdError(err: unknown): unknown {
  if (err instanceof SandtreeError && err.code === "ALREADY_EXISTS") return new ConnectError(err.message, Code.AlreadyExists);
  return err;
}

/** The caller of a handler's call. */
export function callerOf(ctx: HandlerContext): EnvdCaller {
  return ctx.values.get(ENVD_CALLER);
}

/** Whether the call ended by its deadline (the client's timeout), not by the client going away. */
export function deadlinePassed(ctx: HandlerContext): boolean {
  const r: unknown = ctx.signal.reason;
  return r instanceof ConnectError && r.code === Code.DeadlineExceeded;
}

/** `Keepalive-Ping-Interval` (seconds): how often a quiet stream sends a keepalive. */
export function keepaliveMs(ctx: HandlerContext): number {
  const n = Number.parseInt(ctx.requestHeader.get("keepalive-ping-interval") ?? "", 10);
  return Number.isSafeInteger(n) && n > 0 ? Math.min(n, 3600) * 1000 : 50_000;
}

/**
 * The items of `source` with `"keepalive"` between them whenever it is quiet for `everyMs`;
 * ends (returning the source) when `signal` aborts.
 */
export async function* withKeepalive<T>(
  source: AsyncIterable<T>,
  everyMs: number,
  signal: AbortSignal,
): AsyncGenerator<T | "keepalive"> {
  const it = source[Symbol.asyncIterator]();
  const aborted = new Promise<"abort">((resolve) => {
    if (signal.aborted) resolve("abort");
    else signal.addEventListener("abort", () => resolve("abort"), { once: true });
  });
  let pending = it.next();
  try {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const tick = new Promise<"tick">((resolve) => {
        timer = setTimeout(() => resolve("tick"), everyMs);
      });
      const r = await Promise.race([pending, tick, aborted]);
      clearTimeout(timer);
      if (r === "abort") return;
      if (r === "tick") {
        yield "keepalive";
        continue;
      }
      if (r.done) return;
      yield r.value;
      pending = it.next();
    }
  } finally {
    void it.return?.();
  }
}

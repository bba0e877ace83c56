import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { mountConnect } from "../../connect/engine.js";
import { CommandSession } from "../../gen/command_session/command_session_pb.js";
import type { Services } from "../../services/services.js";
import { commandSessionService, PRIME_CALL } from "./prime-command-session.js";
import { gatewayCaller, SandboxGoneError } from "./prime-gateway-auth.js";
import { GATEWAY_PREFIX } from "./prime-gateway-routes.js";
import { PrimeSessions } from "./prime-sessions.js";

/**
 * The gateway's Connect-RPC command session (binary protobuf, as the Prime client speaks it),
 * on the server's Connect engine, beside the gateway's file routes under the same prefix.
 */
export function primeCommandSession(app: FastifyInstance, s: Services): string[] {
  const sessions = new PrimeSessions(s);
  return mountConnect(app, PRIME_CALL, {
    prefix: GATEWAY_PREFIX,
    services: [CommandSession],
    routes: (router) => router.service(CommandSession, commandSessionService(s, sessions)),
    context: async (req) => {
      try {
        return await gatewayCaller(s, req.params, req.headers.authorization);
      } catch (err) {
        // The client reads NOT_FOUND as "the sandbox is gone" (SandboxNotRunningError).
        if (err instanceof SandboxGoneError) throw new ConnectError(err.message, Code.NotFound);
        throw err;
      }
    },
  });
}

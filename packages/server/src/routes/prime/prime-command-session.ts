import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { ExecRequest, isErrorCode, type Sandbox, SandtreeError } from "@sandtree/protocol";
import { connectContextKey, toConnectError } from "../../connect/engine.js";
import { parse } from "../../errors.js";
import {
  type CommandSession,
  type CommandSessionEventSchema,
  type CommandSessionSelector,
  ConnectResponseSchema,
  ListResponseSchema,
  SendInputResponseSchema,
  SendSignalResponseSchema,
  Signal,
  StartResponseSchema,
} from "../../gen/command_session/command_session_pb.js";
import type { Services } from "../../services/services.js";
import type { Principal } from "../../services/teams/auth-service.js";
import { type EventQueue, type PrimeSessions, EventQueue as Queue, type Session, type SessionEvent } from "./prime-sessions.js";

/** A silent command's stream carries a keepalive this often (proxies drop idle streams). */
const KEEPALIVE_MS = 15_000;

/** Who calls, on which sandbox: the mount's context (prime-connect.ts), set on every call. */
export interface GatewayCall {
  principal: Principal;
  sandbox: Sandbox;
}

export const PRIME_CALL = connectContextKey<GatewayCall | null>("sandtree.prime.call", null);

function caller(ctx: HandlerContext): GatewayCall {
  const call = ctx.values.get(PRIME_CALL);
  if (!call) throw new ConnectError("no gateway caller", Code.Unauthenticated);
  return call;
}

type EventInit = Parameters<typeof create<typeof CommandSessionEventSchema>>[1];

function eventOf(ev: SessionEvent): EventInit {
  switch (ev.type) {
    case "start":
      return { event: { case: "start", value: { pid: ev.pid } } };
    case "stdout":
      return { event: { case: "data", value: { output: { case: "stdout", value: ev.data } } } };
    case "stderr":
      return { event: { case: "data", value: { output: { case: "stderr", value: ev.data } } } };
    case "end":
      return { event: { case: "end", value: { exitCode: ev.exitCode, exited: true, status: ev.status } } };
    case "error":
      throw toConnectError(new SandtreeError(isErrorCode(ev.code) ? ev.code : "GUEST_ERROR", ev.message));
  }
}

/** The session's events as the stream's messages, a keepalive when it is silent, until its end. */
async function* relay(q: EventQueue, signal: AbortSignal): AsyncGenerator<EventInit> {
  for (;;) {
    const ev = await q.next(KEEPALIVE_MS, signal);
    // A deadline passed (connect-node's reason says so) or the caller went.
    if (signal.aborted) throw toConnectError(signal.reason ?? new ConnectError("the call was cancelled", Code.Canceled));
    if (ev === null) return;
    if (ev === "idle") {
      yield { event: { case: "keepalive", value: {} } };
      continue;
    }
    yield eventOf(ev);
    if (ev.type === "end") return;
  }
}

function selected(sessions: PrimeSessions, teamId: string, sid: string, sel: CommandSessionSelector | undefined): Session {
  const s = sel?.selector;
  const found =
    s?.case === "sessionUuid"
      ? sessions.find(teamId, sid, { uuid: s.value })
      : s?.case === "pid"
        ? sessions.find(teamId, sid, { pid: s.value })
        : undefined;
  if (!found) throw new ConnectError("no such command session (it ended, or never started)", Code.NotFound);
  return found;
}

/**
 * Prime's `command_session.CommandSession` on sandtree's exec service. Start runs `cmd` with
 * `args` (no shell of sandtree's own), streaming start, data, end and keepalive events; with a
 * session_uuid the command outlives a dropped stream (Connect re-attaches, SendInput and
 * SendSignal find it); without one, it is killed when its stream goes (a deadline included).
 */
export function commandSessionService(s: Services, sessions: PrimeSessions): ServiceImpl<typeof CommandSession> {
  return {
    async *start(req, ctx) {
      const { principal, sandbox } = caller(ctx);
      if (req.pty !== undefined)
        throw new ConnectError("PTY sessions are not served by sandtree's Prime gateway", Code.Unimplemented);
      const uuid = req.sessionUuid ?? null;
      const existing = uuid === null ? undefined : sessions.find(principal.teamId, sandbox.id, { uuid });
      let session = existing;
      let q: EventQueue;
      if (session) q = sessions.subscribe(session);
      else {
        const spec = req.command;
        if (!spec?.cmd) throw new ConnectError("command.cmd is required", Code.InvalidArgument);
        let params: ReturnType<typeof parse<typeof ExecRequest>>;
        try {
          params = parse(ExecRequest, {
            command: [spec.cmd, ...spec.args],
            env: spec.envs,
            ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {}),
            ...(spec.user !== undefined ? { user: spec.user } : {}),
            stdin_open: req.stdin === true,
          });
        } catch (err) {
          throw toConnectError(err);
        }
        q = new Queue();
        session = await sessions.start(principal.teamId, sandbox.id, uuid, params, q).catch((err) => {
          throw toConnectError(err);
        });
      }
      const end = await s.timeouts.begin(principal.teamId, sandbox.id);
      try {
        for await (const event of relay(q, ctx.signal)) yield create(StartResponseSchema, { event });
      } finally {
        end();
        sessions.unsubscribe(session, q);
        // Without a uuid nobody can attach again: the command goes with its stream.
        if (uuid === null && session.last === null) session.abort.abort();
      }
    },

    async *connect(req, ctx) {
      const { principal, sandbox } = caller(ctx);
      const session = selected(sessions, principal.teamId, sandbox.id, req.session);
      const q = sessions.subscribe(session);
      try {
        for await (const event of relay(q, ctx.signal)) yield create(ConnectResponseSchema, { event });
      } finally {
        sessions.unsubscribe(session, q);
      }
    },

    async sendInput(req, ctx) {
      const { principal, sandbox } = caller(ctx);
      const session = selected(sessions, principal.teamId, sandbox.id, req.session);
      const input = req.input?.input;
      if (input?.case === "pty") throw new ConnectError("PTY input: this session has no PTY", Code.InvalidArgument);
      if (input?.case !== "stdin") throw new ConnectError("input.stdin is required", Code.InvalidArgument);
      if (session.execId === null || session.last !== null) throw new ConnectError("the command is not running", Code.NotFound);
      if (sessions.firstSeen(session, req.inputUuid)) {
        const data = input.value;
        await s.exec
          .writeStdin(
            principal.teamId,
            sandbox.id,
            session.execId,
            (async function* () {
              yield data;
            })(),
            false,
          )
          .catch((err) => {
            throw toConnectError(err);
          });
      }
      return create(SendInputResponseSchema, {});
    },

    async sendSignal(req, ctx) {
      const { principal, sandbox } = caller(ctx);
      const session = selected(sessions, principal.teamId, sandbox.id, req.session);
      if (req.signal !== Signal.SIGTERM && req.signal !== Signal.SIGKILL) {
        throw new ConnectError("signal: SIGNAL_SIGTERM or SIGNAL_SIGKILL", Code.InvalidArgument);
      }
      // A command that already ended has nothing to signal: acknowledged, as a retried signal is.
      if (session.execId !== null && session.last === null && sessions.firstSeen(session, req.signalUuid)) {
        try {
          s.exec.signal(principal.teamId, sandbox.id, session.execId, req.signal);
        } catch (err) {
          throw toConnectError(err);
        }
      }
      return create(SendSignalResponseSchema, {});
    },

    async list(_req, ctx) {
      const { principal, sandbox } = caller(ctx);
      return create(ListResponseSchema, {
        sessions: sessions
          .live(principal.teamId, sandbox.id)
          .filter((x) => x.pid !== null)
          .map((x) => ({
            pid: x.pid ?? 0,
            ...(x.uuid !== null ? { sessionUuid: x.uuid } : {}),
            command: {
              cmd: x.argv[0] ?? "",
              args: x.argv.slice(1),
              ...(x.cwd !== undefined ? { cwd: x.cwd } : {}),
              ...(x.user !== undefined ? { user: x.user } : {}),
            },
          })),
      });
    },

    async update() {
      throw new ConnectError(
        "Update (PTY resize) is not served by sandtree's Prime gateway: sessions have no PTY",
        Code.Unimplemented,
      );
    },

    async streamInput() {
      throw new ConnectError("StreamInput is not served by sandtree's Prime gateway: use SendInput", Code.Unimplemented);
    },
  };
}

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  type ConnectResponse,
  ConnectResponseSchema,
  type Process,
  type ProcessEvent,
  ProcessEventSchema,
  type ProcessSelector,
  type StartResponse,
  StartResponseSchema,
} from "../../gen/process/process_pb.js";
import type { ProcessEvent as TableEvent } from "../../services/commands/process-table.js";
import type { Services } from "../../services/services.js";
import { callerOf, deadlinePassed, keepaliveMs, withKeepalive } from "./envd-context.js";

const SIGNAL_NAMES: Record<number, string> = { 1: "hangup", 2: "interrupt", 9: "killed", 15: "terminated" };

function selector(sel: ProcessSelector | undefined): { pid: number } | { tag: string } {
  if (sel?.selector.case === "pid") return { pid: sel.selector.value };
  if (sel?.selector.case === "tag") return { tag: sel.selector.value };
  throw new ConnectError("a process selector (pid or tag) is required", Code.InvalidArgument);
}

/** A process table event as envd's (end: Go's wording, which the SDKs show as the error). */
function toEvent(ev: TableEvent | "keepalive"): ProcessEvent {
  if (ev === "keepalive") return create(ProcessEventSchema, { event: { case: "keepalive", value: {} } });
  switch (ev.type) {
    case "start":
      return create(ProcessEventSchema, { event: { case: "start", value: { pid: ev.pid } } });
    case "stdout":
    case "stderr":
    case "pty":
      return create(ProcessEventSchema, { event: { case: "data", value: { output: { case: ev.type, value: ev.data } } } });
    case "end": {
      const status =
        ev.signal !== null ? `signal: ${SIGNAL_NAMES[ev.signal] ?? `signal ${ev.signal}`}` : `exit status ${ev.exit_code}`;
      const failed = ev.error ?? (ev.signal !== null || ev.exit_code !== 0 ? status : undefined);
      return create(ProcessEventSchema, {
        event: {
          case: "end",
          value: {
            exitCode: ev.signal !== null ? -1 : ev.exit_code,
            exited: ev.error === undefined && ev.signal === null,
            status,
            ...(failed !== undefined ? { error: failed } : {}),
          },
        },
      });
    }
  }
}

/** envd's process service over the process table: processes outlive the stream that started them. */
export function processService(s: Services): ServiceImpl<typeof Process> {
  async function* follow(
    events: AsyncIterable<TableEvent>,
    ctx: HandlerContext,
    onDeadline?: () => void,
  ): AsyncGenerator<ProcessEvent> {
    const stopOnDeadline = () => {
      if (deadlinePassed(ctx)) onDeadline?.();
    };
    ctx.signal.addEventListener("abort", stopOnDeadline, { once: true });
    try {
      for await (const ev of withKeepalive(events, keepaliveMs(ctx), ctx.signal)) yield toEvent(ev);
    } finally {
      ctx.signal.removeEventListener("abort", stopOnDeadline);
    }
    if (deadlinePassed(ctx)) throw new ConnectError("the request's timeout passed", Code.DeadlineExceeded);
  }

  return {
    async list(_req, ctx) {
      const c = callerOf(ctx);
      const processes = await s.processes.list(c.teamId, c.sandboxId);
      return {
        processes: processes.map((p) => ({
          pid: p.pid,
          ...(p.tag !== undefined ? { tag: p.tag } : {}),
          config: { cmd: p.config.cmd, args: p.config.args, envs: p.config.envs, ...(p.config.cwd ? { cwd: p.config.cwd } : {}) },
        })),
      };
    },

    // The process is killed when the call's deadline (the SDK's timeoutMs) passes; a client that
    // goes away (disconnect) leaves it running, to be connected to again by pid or tag.
    async *start(req, ctx): AsyncGenerator<StartResponse> {
      const c = callerOf(ctx);
      const p = req.process;
      if (!p?.cmd) throw new ConnectError("process.cmd is required", Code.InvalidArgument);
      const size = req.pty?.size;
      const { pid, events } = await s.processes.start(c.teamId, c.sandboxId, {
        cmd: p.cmd,
        args: p.args,
        envs: p.envs,
        stdin: req.stdin ?? true,
        ...(p.cwd ? { cwd: p.cwd } : {}),
        ...(c.user ? { user: c.user } : {}),
        ...(req.tag !== undefined ? { tag: req.tag } : {}),
        ...(size ? { pty: { rows: size.rows || 24, cols: size.cols || 80 } } : {}),
      });
      const kill = () => {
        try {
          s.processes.signal(c.teamId, c.sandboxId, { pid }, 9);
        } catch {
          // Already ended.
        }
      };
      for await (const event of follow(events, ctx, kill)) yield create(StartResponseSchema, { event });
    },

    async *connect(req, ctx): AsyncGenerator<ConnectResponse> {
      const c = callerOf(ctx);
      const { events } = s.processes.attach(c.teamId, c.sandboxId, selector(req.process));
      for await (const event of follow(events, ctx)) yield create(ConnectResponseSchema, { event });
    },

    async update(req, ctx) {
      const c = callerOf(ctx);
      const size = req.pty?.size;
      if (!size) throw new ConnectError("pty.size is required", Code.InvalidArgument);
      s.processes.resize(c.teamId, c.sandboxId, selector(req.process), size.rows, size.cols);
      return {};
    },

    async sendInput(req, ctx) {
      const c = callerOf(ctx);
      const input = req.input?.input;
      if (!input?.case) throw new ConnectError("input (stdin or pty) is required", Code.InvalidArgument);
      await s.processes.write(c.teamId, c.sandboxId, selector(req.process), Buffer.from(input.value));
      return {};
    },

    async streamInput(reqs, ctx) {
      const c = callerOf(ctx);
      let sel: { pid: number } | { tag: string } | null = null;
      for await (const r of reqs) {
        if (r.event.case === "start") sel = selector(r.event.value.process);
        else if (r.event.case === "data") {
          const input = r.event.value.input?.input;
          if (!sel) throw new ConnectError("the stream's first message must be start", Code.InvalidArgument);
          if (input?.case) await s.processes.write(c.teamId, c.sandboxId, sel, Buffer.from(input.value));
        }
      }
      return {};
    },

    async sendSignal(req, ctx) {
      const c = callerOf(ctx);
      if (req.signal !== 9 && req.signal !== 15)
        throw new ConnectError("signal must be SIGTERM or SIGKILL", Code.InvalidArgument);
      s.processes.signal(c.teamId, c.sandboxId, selector(req.process), req.signal);
      return {};
    },

    async closeStdin(req, ctx) {
      const c = callerOf(ctx);
      s.processes.closeStdin(c.teamId, c.sandboxId, selector(req.process));
      return {};
    },
  };
}

import { randomBytes } from "node:crypto";
import type { AgentExec, ExecSpec } from "@sandtree/host";
import { type ExecEvent, type ExecParams, type ExecResult, SandtreeError } from "@sandtree/protocol";
import type { SandboxService } from "./sandbox-service.js";

/** What the buffered call returns of each stream; the rest is dropped and flagged `truncated`. */
export const BUFFERED_OUTPUT_CAP = 16 * 1024 * 1024;

interface LiveExec {
  teamId: string;
  sandboxId: string;
  exec: AgentExec;
}

const SIGNALS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGUSR2: 12,
  SIGTERM: 15,
  SIGCONT: 18,
  SIGSTOP: 19,
};

export class ExecService {
  private readonly live = new Map<string, LiveExec>();

  constructor(private readonly sandboxes: SandboxService) {}

  private start(teamId: string, sandboxId: string, p: ExecParams, keepStdinOpen: boolean): { execId: string; exec: AgentExec } {
    const vm = this.sandboxes.running(teamId, sandboxId);
    const sb = this.sandboxes.get(teamId, sandboxId);
    const spec: ExecSpec = {
      env: { ...sb.environment_vars, ...p.env },
      stdin: p.stdin !== undefined || keepStdinOpen,
    };
    if (typeof p.command === "string") spec.shell = p.command;
    else spec.argv = p.command;
    if (p.cwd !== undefined) spec.cwd = p.cwd;
    if (p.user !== undefined) spec.user = p.user;
    if (p.timeout_seconds !== undefined) spec.timeoutMs = p.timeout_seconds * 1000;
    const exec = vm.agent.exec(spec);
    const execId = `ex-${randomBytes(8).toString("hex")}`;
    this.live.set(execId, { teamId, sandboxId, exec });
    exec.exited.then(
      () => this.live.delete(execId),
      () => this.live.delete(execId),
    );
    if (p.stdin !== undefined) {
      const data = Buffer.from(p.stdin, "utf8");
      exec
        .writeStdin(data)
        .then(() => {
          if (!keepStdinOpen) exec.closeStdin();
        })
        .catch(() => {});
    }
    return { execId, exec };
  }

  async runBuffered(teamId: string, sandboxId: string, p: ExecParams): Promise<ExecResult> {
    const started = performance.now();
    const { exec } = this.start(teamId, sandboxId, p, false);
    const out = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
    const size = { stdout: 0, stderr: 0 };
    const truncated = { stdout: false, stderr: false };
    try {
      for await (const ev of exec.events) {
        if (ev.type === "stdout" || ev.type === "stderr") {
          const room = BUFFERED_OUTPUT_CAP - size[ev.type];
          if (room <= 0) {
            truncated[ev.type] = true;
            continue;
          }
          const chunk = ev.data.length > room ? ev.data.subarray(0, room) : ev.data;
          if (chunk.length < ev.data.length) truncated[ev.type] = true;
          out[ev.type].push(chunk);
          size[ev.type] += chunk.length;
        } else if (ev.type === "exit") {
          return {
            stdout: Buffer.concat(out.stdout).toString("utf8"),
            stderr: Buffer.concat(out.stderr).toString("utf8"),
            exit_code: ev.info.exit_code,
            signal: ev.info.signal,
            timed_out: ev.info.timed_out,
            stdout_truncated: truncated.stdout,
            stderr_truncated: truncated.stderr,
            duration_ms: Math.round(performance.now() - started),
          };
        }
      }
    } catch (err) {
      throw new SandtreeError("GUEST_ERROR", `exec failed: ${(err as Error).message}`);
    }
    throw new SandtreeError("GUEST_ERROR", "exec ended without an exit status");
  }

  /** Streams events; if the consumer stops early (client gone), the process group is killed. */
  stream(teamId: string, sandboxId: string, p: ExecParams): AsyncIterable<ExecEvent> {
    const started = performance.now();
    const { execId, exec } = this.start(teamId, sandboxId, p, p.stdin_open);
    return {
      async *[Symbol.asyncIterator]() {
        let finished = false;
        try {
          for await (const ev of exec.events) {
            if (ev.type === "started") yield { type: "started", exec_id: execId, pid: ev.pid };
            else if (ev.type === "stdout" || ev.type === "stderr") yield { type: ev.type, data: ev.data.toString("base64") };
            else {
              finished = true;
              yield {
                type: "exit",
                exit_code: ev.info.exit_code,
                signal: ev.info.signal,
                timed_out: ev.info.timed_out,
                duration_ms: Math.round(performance.now() - started),
              };
            }
          }
        } catch (err) {
          finished = true;
          yield { type: "error", code: "GUEST_ERROR", message: (err as Error).message };
        } finally {
          if (!finished) exec.signal(9);
        }
      },
    };
  }

  private find(teamId: string, sandboxId: string, execId: string): LiveExec {
    const l = this.live.get(execId);
    if (!l || l.teamId !== teamId || l.sandboxId !== sandboxId) {
      throw new SandtreeError("NOT_FOUND", `exec ${execId} not found or already finished`, { exec_id: execId });
    }
    return l;
  }

  signal(teamId: string, sandboxId: string, execId: string, signal: string | number): void {
    const num = typeof signal === "number" ? signal : SIGNALS[signal];
    if (num === undefined) throw new SandtreeError("VALIDATION_FAILED", `unknown signal ${signal}`, { field: "signal" });
    this.find(teamId, sandboxId, execId).exec.signal(num);
  }

  async writeStdin(
    teamId: string,
    sandboxId: string,
    execId: string,
    body: AsyncIterable<Uint8Array>,
    close: boolean,
  ): Promise<void> {
    const { exec } = this.find(teamId, sandboxId, execId);
    for await (const chunk of body) await exec.writeStdin(Buffer.from(chunk));
    if (close) exec.closeStdin();
  }
}

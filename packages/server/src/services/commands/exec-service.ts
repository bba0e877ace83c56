import { randomBytes } from "node:crypto";
import type { ExecSpec, MachineExec } from "@sandtree/host";
import { type ExecParams, type ExecResult, type ExecStreamEvent, SandtreeError } from "@sandtree/protocol";
import { streamErrorCode } from "../observability/error-codes.js";
import type { SandboxService } from "../sandboxes/sandbox-service.js";
import { DEFAULT_SPILL_CAP_BYTES, HeadBuffer, OutputSpill, type OutputStream, readSpilled } from "./output-spill.js";
import { signalNumber } from "./signals.js";

/** What the buffered call returns of each stream; the rest is dropped and flagged `truncated`. */
export const BUFFERED_OUTPUT_CAP = 16 * 1024 * 1024;

interface LiveExec {
  teamId: string;
  sandboxId: string;
  exec: MachineExec;
}

export class ExecService {
  private readonly live = new Map<string, LiveExec>();
  /** Per stream of a buffered exec; bytes past it are dropped and flagged `*_spill_truncated`. */
  spillCapBytes = DEFAULT_SPILL_CAP_BYTES;

  constructor(private readonly sandboxes: SandboxService) {}

  private async start(
    teamId: string,
    sandboxId: string,
    p: ExecParams,
    keepStdinOpen: boolean,
  ): Promise<{ execId: string; exec: MachineExec }> {
    const vm = await this.sandboxes.running(teamId, sandboxId);
    const sb = await this.sandboxes.get(teamId, sandboxId);
    const spec: ExecSpec = {
      env: { ...(await this.sandboxes.environmentOf(sb)), ...p.env },
      stdin: p.stdin !== undefined || keepStdinOpen,
    };
    if (typeof p.command === "string") spec.shell = p.command;
    else spec.argv = p.command;
    if (p.cwd !== undefined) spec.cwd = p.cwd;
    if (p.user !== undefined) spec.user = p.user;
    if (p.timeout_seconds !== undefined) spec.timeoutMs = p.timeout_seconds * 1000;
    const exec = vm.exec(spec);
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
    const { execId, exec } = await this.start(teamId, sandboxId, p, false);
    // Everything is also spilled to disk, so what passes the cap stays readable by exec_id.
    const spill = new OutputSpill(this.sandboxes.outputDir(sandboxId), execId, this.spillCapBytes);
    const head = { stdout: new HeadBuffer(BUFFERED_OUTPUT_CAP), stderr: new HeadBuffer(BUFFERED_OUTPUT_CAP) };
    try {
      for await (const ev of exec.events) {
        if (ev.type === "stdout" || ev.type === "stderr") {
          await spill.write(ev.type, ev.data);
          head[ev.type].push(ev.data);
        } else if (ev.type === "exit") {
          await spill.close();
          return {
            stdout: head.stdout.take(),
            stderr: head.stderr.take(),
            exit_code: ev.info.exit_code,
            signal: ev.info.signal,
            timed_out: ev.info.timed_out,
            stdout_truncated: head.stdout.truncated,
            stderr_truncated: head.stderr.truncated,
            duration_ms: Math.round(performance.now() - started),
            exec_id: execId,
            stdout_bytes: spill.bytes.stdout,
            stderr_bytes: spill.bytes.stderr,
            stdout_spill_truncated: spill.truncated.stdout,
            stderr_spill_truncated: spill.truncated.stderr,
          };
        }
      }
    } catch (err) {
      throw new SandtreeError("GUEST_ERROR", `exec failed: ${(err as Error).message}`);
    } finally {
      await spill.close();
    }
    throw new SandtreeError("GUEST_ERROR", "exec ended without an exit status");
  }

  /** A byte range of a buffered exec's kept stdout or stderr. */
  async output(teamId: string, sandboxId: string, execId: string, q: { stream: OutputStream; offset: number; length?: number }) {
    await this.sandboxes.get(teamId, sandboxId);
    return readSpilled(this.sandboxes.outputDir(sandboxId), execId, q.stream, q.offset, q.length);
  }

  /**
   * Streams events, output as bytes (the route encodes them for its wire form). If the consumer
   * stops early, or `gone` aborts (the client disconnected, even while the command is silent and
   * no event is pending), the process group is killed.
   */
  async stream(teamId: string, sandboxId: string, p: ExecParams, gone?: AbortSignal): Promise<AsyncIterable<ExecStreamEvent>> {
    const started = performance.now();
    const { execId, exec } = await this.start(teamId, sandboxId, p, p.stdin_open);
    let finished = false;
    const killUnlessFinished = () => {
      if (!finished) exec.signal(9);
    };
    if (gone?.aborted) killUnlessFinished();
    else gone?.addEventListener("abort", killUnlessFinished, { once: true });
    return {
      async *[Symbol.asyncIterator]() {
        try {
          for await (const ev of exec.events) {
            if (ev.type === "started") yield { type: "started", exec_id: execId, pid: ev.pid };
            else if (ev.type === "stdout" || ev.type === "stderr") yield { type: ev.type, data: ev.data };
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
          yield { type: "error", code: streamErrorCode(err, "GUEST_ERROR"), message: (err as Error).message };
        } finally {
          gone?.removeEventListener("abort", killUnlessFinished);
          killUnlessFinished();
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
    const num = signalNumber(signal);
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

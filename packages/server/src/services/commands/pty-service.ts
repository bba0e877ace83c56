import { type ExecSpec, GuestError, type MachineExec, type MachineExecEvent } from "@sandtree/host";
import { type PtyParams, SandtreeError } from "@sandtree/protocol";
import type { SandboxService } from "../sandboxes/sandbox-service.js";
import { signalNumber } from "./signals.js";

/** How an interactive process ended. */
export interface PtyExit {
  exit_code: number;
  signal: number | null;
}

/** One process on a pseudo-terminal in a sandbox; the transport (WebSocket) lives in routes/. */
export interface PtySession {
  /** Terminal output; ends after the process exited. Credit goes back to the guest as it is taken. */
  output: AsyncIterable<Buffer>;
  exited: Promise<PtyExit>;
  /** Keystrokes; resolves once the guest granted credit for them. */
  write(data: Buffer): Promise<void>;
  resize(rows: number, cols: number): void;
  signal(signal: string | number): void;
  /** Types the terminal's end-of-file character (^D). */
  eof(): void;
  /** Kills every process of the terminal's session. */
  kill(): void;
}

export class PtyService {
  constructor(private readonly sandboxes: SandboxService) {}

  /**
   * Starts the command (default: the image's shell) on a new pty. Resolves once the guest
   * started it, so a bad cwd or user fails here, before the caller upgrades the connection.
   */
  async open(teamId: string, sandboxId: string, p: PtyParams): Promise<PtySession> {
    const vm = await this.sandboxes.running(teamId, sandboxId);
    const sb = await this.sandboxes.get(teamId, sandboxId);
    const spec: ExecSpec = { env: await this.sandboxes.environmentOf(sb), pty: { rows: p.rows, cols: p.cols } };
    if (p.command !== undefined) spec.shell = p.command;
    else spec.argv = [(await isFile(vm, "/bin/bash")) ? "/bin/bash" : "/bin/sh"];
    if (p.cwd !== undefined) spec.cwd = p.cwd;
    if (p.user !== undefined) spec.user = p.user;
    const exec = vm.exec(spec);
    let first: IteratorResult<MachineExecEvent>;
    try {
      first = await exec.events.next();
    } catch (err) {
      throw startError(err, p);
    }
    if (first.done || first.value.type !== "started") {
      exec.signal(9);
      throw new SandtreeError("GUEST_ERROR", "the terminal's process did not start");
    }
    return session(exec);
  }
}

async function isFile(agent: { stat(path: string): Promise<{ type: string }> }, path: string): Promise<boolean> {
  try {
    return (await agent.stat(path)).type !== "dir";
  } catch {
    return false;
  }
}

function startError(err: unknown, p: PtyParams): SandtreeError {
  if (err instanceof GuestError && ["ENOENT", "ENOTDIR", "EACCES"].includes(err.errnoCode)) {
    const field = err.message.includes("user") ? "user" : "cwd";
    return new SandtreeError("VALIDATION_FAILED", `${field}: ${err.message}`, { field, value: p[field] ?? null });
  }
  return new SandtreeError("GUEST_ERROR", `cannot start the terminal: ${(err as Error).message}`);
}

function session(exec: MachineExec): PtySession {
  let ended = false;
  const exited = exec.exited.then((i) => ({ exit_code: i.exit_code, signal: i.signal }));
  exited.then(
    () => {
      ended = true;
    },
    () => {
      ended = true;
    },
  );
  return {
    output: {
      async *[Symbol.asyncIterator]() {
        for await (const ev of exec.events) if (ev.type === "stdout" || ev.type === "stderr") yield ev.data;
      },
    },
    exited,
    write: (data) => exec.writeStdin(data),
    resize: (rows, cols) => exec.resize(rows, cols),
    signal: (sig) => exec.signal(signalNumber(sig)),
    eof: () => exec.closeStdin(),
    kill: () => {
      if (!ended) exec.signal(9);
    },
  };
}

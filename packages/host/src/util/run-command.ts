import { spawn } from "node:child_process";
import { type ErrorCode, SandtreeError } from "@sandtree/protocol";

export interface RunOptions {
  signal?: AbortSignal | undefined;
  cwd?: string;
  /** Error code used when the command fails to start or exits non-zero (default HOST_COMMAND_FAILED). */
  errorCode?: ErrorCode;
  /** Written to the command's stdin, which is then closed (by default stdin is /dev/null). */
  input?: string;
  /** Keep at most this many bytes of stdout (stderr is always capped at 64 KiB). */
  maxStdoutBytes?: number;
}

export interface RunResult {
  stdout: string;
  stderr: string;
}

const STDERR_CAP = 64 * 1024;

/**
 * Runs `argv` without a shell. A failure becomes a SandtreeError whose details carry the
 * command, the exit code (or signal) and stderr, so callers never parse messages.
 */
export function runCommand(argv: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const [file, ...args] = argv;
  if (file === undefined) throw new TypeError("runCommand: empty argv");
  const code: ErrorCode = options.errorCode ?? "HOST_COMMAND_FAILED";
  const maxStdout = options.maxStdoutBytes ?? 16 * 1024 * 1024;
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) {
      reject(abortError(options.signal, argv));
      return;
    }
    const spawnOpts = { cwd: options.cwd, signal: options.signal };
    const child =
      options.input === undefined
        ? spawn(file, args, { ...spawnOpts, stdio: ["ignore", "pipe", "pipe"] })
        : spawn(file, args, { ...spawnOpts, stdio: ["pipe", "pipe", "pipe"] });
    if (child.stdin) {
      // A command that exits before reading its input must not turn EPIPE into a crash.
      child.stdin.on("error", () => {});
      child.stdin.end(options.input);
    }
    const out: Buffer[] = [];
    let outLen = 0;
    let err = "";
    child.stdout.on("data", (chunk: Buffer) => {
      if (outLen < maxStdout) {
        out.push(chunk);
        outLen += chunk.length;
      }
    });
    child.stderr.on("data", (chunk: Buffer) => {
      if (err.length < STDERR_CAP) err += chunk.toString("utf8");
    });
    let settled = false;
    child.on("error", (e: NodeJS.ErrnoException) => {
      if (settled) return;
      settled = true;
      if (options.signal?.aborted) {
        reject(abortError(options.signal, argv));
        return;
      }
      reject(
        new SandtreeError(code, `${file} failed to start: ${e.message}`, {
          command: [...argv],
          errno: e.code,
        }),
      );
    });
    child.on("close", (exitCode, sig) => {
      if (settled) return;
      settled = true;
      if (options.signal?.aborted) {
        reject(abortError(options.signal, argv));
        return;
      }
      const stderr = err.slice(0, STDERR_CAP);
      if (exitCode === 0) {
        resolve({ stdout: Buffer.concat(out).toString("utf8"), stderr });
        return;
      }
      const how = exitCode === null ? `killed by ${sig ?? "signal"}` : `exited with ${exitCode}`;
      const firstLine = stderr.trim().split("\n").slice(-3).join(" | ");
      reject(
        new SandtreeError(code, `${file} ${how}${firstLine ? `: ${firstLine}` : ""}`, {
          command: [...argv],
          exitCode,
          signal: sig,
          stderr,
        }),
      );
    });
  });
}

/** The error thrown when an operation is cancelled through its AbortSignal. */
export function abortError(signal: AbortSignal, command?: readonly string[]): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  const e = new Error(command ? `aborted: ${command.join(" ")}` : "aborted");
  e.name = "AbortError";
  return e;
}

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortError(signal);
}

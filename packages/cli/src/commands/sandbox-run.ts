import type { Writable } from "node:stream";
import type { ExecExit, ExecHandle } from "@sandtree/sdk";
import type { Command } from "commander";
import type { CliContext, In, Out } from "../context.js";
import { describeError, UsageError } from "../errors.js";
import { collectKeyValue, parseNumberArg } from "../kv.js";
import { globalFlags } from "./shared.js";

interface RunFlags {
  env?: Record<string, string>;
  cwd?: string;
  timeout?: number;
  user?: string;
  shell?: string;
  stdin: boolean;
}

const RUN_HELP = `
The words after -- are the command's argv, passed as they are (no shell): a single
quoted word such as "ls -la" is ONE argument (a program named "ls -la"). To get a
shell, use --shell "ls -la | wc -l" (runs under /bin/sh -c).

Exits with the command's exit status (128+N when killed by signal N, 124 on --timeout).
stdin is forwarded when it is not a terminal (disable with --no-stdin). Ctrl-C sends
SIGINT to the command; a second Ctrl-C drops the connection, which kills it.

Examples:
  sandtree sandbox run sb-hzs3n4xqkrgpkpys -- ls -la /
  sandtree sandbox run sb-hzs3n4xqkrgpkpys -e DEBUG=1 -w /work --timeout 60 -- make test
  sandtree sandbox run sb-hzs3n4xqkrgpkpys --shell 'cat /etc/os-release | head -n 2'
  tar c src | sandtree sandbox run sb-hzs3n4xqkrgpkpys -- tar x -C /work`;

export function registerRunCommand(sandbox: Command, ctx: CliContext): void {
  sandbox
    .command("run")
    .description("run a command in a sandbox, streaming its output")
    .argument("<id>", "sandbox id")
    .argument("[command...]", "argv of the command, after --")
    .option("-e, --env <K=V>", "environment variable (repeatable)", collectKeyValue)
    .option("-w, --cwd <dir>", "working directory")
    .option("--timeout <seconds>", "kill the command after this long (exit 124)", parseNumberArg("--timeout"))
    .option("--user <user>", "user name or uid to run as")
    .option("--shell <cmd>", "run a command string under /bin/sh -c instead of an argv")
    .option("--no-stdin", "do not forward stdin")
    .addHelpText("after", RUN_HELP)
    .action(async (id: string, argv: string[], o: RunFlags, cmd: Command) => {
      const command = buildCommand(argv, o.shell);
      const forward = o.stdin && !ctx.stdin.isTTY;
      const client = await ctx.client(globalFlags(cmd));
      const handle = await client.sandboxes.exec(id, command, {
        ...(forward ? { stdinOpen: true } : {}),
        ...(o.env !== undefined ? { env: o.env } : {}),
        ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
        ...(o.user !== undefined ? { user: o.user } : {}),
        ...(o.timeout !== undefined ? { timeoutSeconds: o.timeout } : {}),
      });
      ctx.exitCode = await streamToTerminal(handle, ctx, forward);
    });
}

/** `--shell CMD` gives a string (run by /bin/sh -c); words after `--` give an argv, kept as they are. */
export function buildCommand(argv: readonly string[], shell: string | undefined): string | string[] {
  if (shell !== undefined && argv.length > 0) {
    throw new UsageError("give either --shell CMD or -- CMD ARGS..., not both");
  }
  if (shell !== undefined) {
    if (shell.trim() === "") throw new UsageError("--shell needs a command");
    return shell;
  }
  if (argv.length === 0) {
    throw new UsageError("missing command: sandtree sandbox run ID -- CMD [ARGS...] (or --shell 'CMD')");
  }
  return [...argv];
}

/**
 * The CLI's exit status for a command's (or a terminal's) exit, as a local shell gives it: the
 * server's exit_code already says 124 for a --timeout kill and 128+N after signal N; only a
 * code that does not (below 128 with a signal, not a timeout) is derived from the signal.
 */
export function exitStatusOf(exit: Pick<ExecExit, "exit_code" | "signal"> & { timed_out?: boolean }): number {
  const code = exit.timed_out ? 124 : exit.signal !== null && exit.exit_code < 128 ? 128 + exit.signal : exit.exit_code;
  return Math.min(255, Math.max(0, code));
}

async function streamToTerminal(handle: ExecHandle, ctx: CliContext, forward: boolean): Promise<number> {
  const stopStdin = forward ? forwardStdin(handle, ctx.stdin, ctx.stderr) : () => {};
  let interrupts = 0;
  const onSigint = () => {
    interrupts++;
    if (interrupts === 1) handle.kill("SIGINT").catch(() => handle.close());
    else void handle.close();
  };
  process.on("SIGINT", onSigint);
  try {
    for await (const event of handle.output()) {
      if (event.type === "stdout") await write(ctx.stdout, event.data);
      else if (event.type === "stderr") await write(ctx.stderr, event.data);
      else return exitStatusOf(event);
    }
    return 1;
  } catch (err) {
    if (interrupts >= 2) return 130;
    if ((err as { code?: unknown }).code === "EPIPE") {
      await handle.close();
      return 141; // like a local command writing to a closed pipe
    }
    throw err;
  } finally {
    process.off("SIGINT", onSigint);
    stopStdin();
  }
}

/** Writes a chunk and waits for the stream to drain when its buffer is full (backpressure). */
function write(out: Writable, data: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    out.once("error", onError);
    const ok = out.write(data, (err) => {
      out.off("error", onError);
      if (err) reject(err);
      else if (ok) resolve();
    });
    if (!ok) {
      out.once("drain", () => {
        out.off("error", onError);
        resolve();
      });
    }
  });
}

/** Copies our stdin to the command's, then closes it; returns a function that stops copying. */
function forwardStdin(handle: ExecHandle, stdin: In, stderr: Out): () => void {
  let stopped = false;
  void (async () => {
    try {
      for await (const chunk of stdin) {
        if (stopped) return;
        await handle.writeStdin(chunk as Uint8Array);
      }
      if (!stopped) await handle.closeStdin().catch(() => {});
    } catch (err) {
      if (!stopped) stderr.write(`warning: stdin not forwarded: ${describeError(err).line}\n`);
    }
  })();
  return () => {
    stopped = true;
    // Without this an idle stdin pipe would keep the CLI alive after the command exited.
    stdin.destroy();
  };
}

import type { ReadStream } from "node:tty";
import type { PtyExit, PtyHandle } from "@sandtree/sdk";
import type { Command } from "commander";
import type { CliContext, In, Out } from "../context.js";
import { exitStatusOf } from "./sandbox-run.js";
import { globalFlags } from "./shared.js";

interface SshFlags {
  command?: string;
  user?: string;
  cwd?: string;
}

const SSH_HELP = `
Opens an interactive shell (the image's /bin/bash, else /bin/sh) on a terminal in the
sandbox, over a WebSocket; no SSH server runs in the sandbox. When stdin is a terminal it
is put in raw mode (restored on exit), so Ctrl-C, Ctrl-D and Ctrl-Z reach the remote side,
and window size changes follow. When stdin is not a terminal it is typed into the remote
terminal, then end-of-file (^D). Exits with the remote exit status (128+N after signal N).

Examples:
  sandtree sandbox ssh sb-hzs3n4xqkrgpkpys
  sandtree sandbox ssh sb-hzs3n4xqkrgpkpys --user app -w /srv --command 'top'
  printf 'uname -a\\nexit\\n' | sandtree sandbox ssh sb-hzs3n4xqkrgpkpys`;

export function registerSshCommand(sandbox: Command, ctx: CliContext): void {
  sandbox
    .command("ssh")
    .description("open an interactive shell in a sandbox (a remote terminal)")
    .argument("<id>", "sandbox id")
    .option("--command <cmd>", "run this under /bin/sh -c instead of the shell")
    .option("--user <user>", "user name or uid to run as")
    .option("-w, --cwd <dir>", "working directory")
    .addHelpText("after", SSH_HELP)
    .action(async (id: string, o: SshFlags, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      const out = ctx.stdout as Out & { rows?: number; columns?: number };
      const pty = await client.sandboxes.pty(id, {
        ...(o.command !== undefined ? { command: o.command } : {}),
        ...(o.user !== undefined ? { user: o.user } : {}),
        ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
        ...(out.isTTY && out.rows && out.columns ? { rows: out.rows, cols: out.columns } : {}),
      });
      ctx.exitCode = exitStatusOf(await attach(pty, ctx));
    });
}

/** Connects the local terminal (or pipes) to the remote one until the process exits. */
async function attach(pty: PtyHandle, ctx: CliContext): Promise<PtyExit> {
  const stdin = ctx.stdin as In & Partial<Pick<ReadStream, "setRawMode" | "isRaw">>;
  const out = ctx.stdout as Out & { rows?: number; columns?: number };
  const raw = stdin.isTTY === true && typeof stdin.setRawMode === "function";
  const wasRaw = stdin.isRaw === true;
  const restore = () => {
    if (raw) stdin.setRawMode?.(wasRaw);
  };
  // Restore the terminal however we leave: normal exit, error, or a signal to the CLI.
  const onExit = () => restore();
  const onTerm = (sig: NodeJS.Signals) => {
    restore();
    void pty.close().finally(() => process.kill(process.pid, sig));
  };
  let interrupts = 0;
  const onSigint = () => {
    // Only without raw mode: there Ctrl-C is a byte the remote terminal gets.
    interrupts++;
    if (interrupts === 1) pty.kill("SIGINT").catch(() => {});
    else void pty.close();
  };
  const onResize = () => {
    if (out.rows && out.columns) pty.resize(out.rows, out.columns).catch(() => {});
  };
  process.on("exit", onExit);
  process.once("SIGTERM", onTerm);
  process.once("SIGHUP", onTerm);
  process.on("SIGINT", onSigint);
  if (out.isTTY) out.on("resize", onResize);
  if (raw) stdin.setRawMode?.(true);
  const onData = (chunk: Buffer | string) => {
    stdin.pause();
    pty.write(typeof chunk === "string" ? Buffer.from(chunk) : chunk).then(
      () => stdin.resume(),
      () => {},
    );
  };
  const onEnd = () => {
    if (!raw) pty.eof().catch(() => {});
  };
  stdin.on("data", onData);
  stdin.once("end", onEnd);
  stdin.resume();
  try {
    for await (const chunk of pty.output) await write(out, chunk);
    return await pty.wait();
  } finally {
    stdin.off("data", onData);
    stdin.off("end", onEnd);
    restore();
    process.off("exit", onExit);
    process.off("SIGTERM", onTerm);
    process.off("SIGHUP", onTerm);
    process.off("SIGINT", onSigint);
    out.off("resize", onResize);
    // Without this an idle stdin would keep the CLI alive after the shell exited.
    stdin.destroy();
    await pty.close();
  }
}

function write(out: Out, data: Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    if (out.write(data, (err) => (err ? reject(err) : undefined))) resolve();
    else out.once("drain", resolve);
  });
}

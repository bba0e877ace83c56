import { stat } from "node:fs/promises";
import path from "node:path";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { formatBytes, type OutputFormat, printResult } from "../output.js";
import { byteProgress } from "../progress.js";
import { globalFlags, outputOption } from "./shared.js";

/** Like cp: a local target that is a directory (or ends in a separator) gets the remote file's name. */
export async function localTarget(local: string, remote: string): Promise<string> {
  const name = path.posix.basename(remote);
  if (local.endsWith("/") || local.endsWith(path.sep)) return path.join(local, name);
  const st = await stat(local).catch(() => null);
  return st?.isDirectory() ? path.join(local, name) : local;
}

/** Like cp: a remote target ending in "/" gets the local file's name. */
export function remoteTarget(local: string, remote: string): string {
  return remote.endsWith("/") ? `${remote}${path.basename(local)}` : remote;
}

export function registerTransferCommands(sandbox: Command, ctx: CliContext): void {
  sandbox
    .command("upload")
    .description("copy a local file into a sandbox (streamed; parent directories are created); prints the path written")
    .argument("<id>", "sandbox id")
    .argument("<local>", "local file")
    .argument("<remote>", "path in the sandbox (ending in / or naming a directory: the file keeps its name)")
    .option("--mode <octal>", "file mode in the sandbox, e.g. 755")
    .addOption(outputOption())
    .action(async (id: string, local: string, remote: string, o: { mode?: string; output: OutputFormat }, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      let target = remoteTarget(local, remote);
      if (target === remote) {
        const st = await client.files.stat(id, remote).catch(() => null);
        if (st?.type === "dir") target = path.posix.join(remote, path.basename(local));
      }
      const progress = byteProgress(ctx.stderr, `upload ${target}`);
      try {
        const result = await client.files.upload(id, local, target, {
          onProgress: progress.onProgress,
          ...(o.mode !== undefined ? { mode: o.mode } : {}),
        });
        progress.done();
        if (ctx.stderr.isTTY) ctx.stderr.write(`uploaded ${formatBytes(result.bytes)} to ${result.path}\n`);
        printResult(ctx.stdout, o.output, result, `${result.path}\n`);
      } catch (err) {
        progress.done();
        throw err;
      }
    });

  sandbox
    .command("download")
    .description("copy a file out of a sandbox (streamed; written whole or not at all); prints the path written")
    .argument("<id>", "sandbox id")
    .argument("<remote>", "path in the sandbox")
    .argument("<local>", "local file to write (a directory: the file keeps its name)")
    .addOption(outputOption())
    .action(async (id: string, remote: string, local: string, o: { output: OutputFormat }, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      const target = await localTarget(local, remote);
      const progress = byteProgress(ctx.stderr, `download ${remote}`);
      try {
        const result = await client.files.download(id, remote, target, { onProgress: progress.onProgress });
        progress.done();
        if (ctx.stderr.isTTY) ctx.stderr.write(`downloaded ${formatBytes(result.bytes)} to ${target}\n`);
        printResult(ctx.stdout, o.output, { path: target, bytes: result.bytes }, `${target}\n`);
      } catch (err) {
        progress.done();
        throw err;
      }
    });
}

import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { formatBytes } from "../output.js";
import { byteProgress } from "../progress.js";
import { globalFlags } from "./shared.js";

export function registerTransferCommands(sandbox: Command, ctx: CliContext): void {
  sandbox
    .command("upload")
    .description("copy a local file into a sandbox (streamed; parent directories are created)")
    .argument("<id>", "sandbox id")
    .argument("<local>", "local file")
    .argument("<remote>", "path in the sandbox")
    .option("--mode <octal>", "file mode in the sandbox, e.g. 755")
    .action(async (id: string, local: string, remote: string, o: { mode?: string }, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      const progress = byteProgress(ctx.stderr, `upload ${remote}`);
      try {
        const result = await client.files.upload(id, local, remote, {
          onProgress: progress.onProgress,
          ...(o.mode !== undefined ? { mode: o.mode } : {}),
        });
        progress.done();
        if (ctx.stderr.isTTY) ctx.stderr.write(`uploaded ${formatBytes(result.bytes)} to ${result.path}\n`);
      } catch (err) {
        progress.done();
        throw err;
      }
    });

  sandbox
    .command("download")
    .description("copy a file out of a sandbox (streamed; written whole or not at all)")
    .argument("<id>", "sandbox id")
    .argument("<remote>", "path in the sandbox")
    .argument("<local>", "local file to write")
    .action(async (id: string, remote: string, local: string, _o: unknown, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      const progress = byteProgress(ctx.stderr, `download ${remote}`);
      try {
        const result = await client.files.download(id, remote, local, { onProgress: progress.onProgress });
        progress.done();
        if (ctx.stderr.isTTY) ctx.stderr.write(`downloaded ${formatBytes(result.bytes)} to ${local}\n`);
      } catch (err) {
        progress.done();
        throw err;
      }
    });
}

import { Command, CommanderError } from "commander";
import { registerHostCommands } from "./commands/host.js";
import { registerImageCommands } from "./commands/image.js";
import { registerSandboxCommands } from "./commands/sandbox.js";
import { registerServeCommands } from "./commands/serve.js";
import { registerTeamCommands } from "./commands/team.js";
import { registerUsageCommands } from "./commands/usage.js";
import { registerVolumeCommands } from "./commands/volume.js";
import { registerWorkerCommands } from "./commands/worker.js";
import type { CliContext } from "./context.js";
import { commanderExitCode, describeError } from "./errors.js";
import { VERSION } from "./version.js";

export { VERSION };

export function buildProgram(ctx: CliContext): Command {
  const program = new Command("sandtree")
    .description("self-hosted microVM sandboxes")
    .version(VERSION)
    .option("--api-url <url>", "server URL (default: $SANDTREE_API_URL, then http://127.0.0.1:7070)")
    .option("--api-key <key>", "API key (default: $SANDTREE_API_KEY, then <data-dir>/credentials.env)")
    .showHelpAfterError("(add --help for usage)")
    .exitOverride()
    .configureOutput({
      writeOut: (s) => ctx.stdout.write(s),
      writeErr: (s) => ctx.stderr.write(s),
      outputError: (s, write) => write(s.replace(/^error: /, "error: USAGE: ")),
    });
  registerSandboxCommands(program, ctx);
  registerImageCommands(program, ctx);
  registerVolumeCommands(program, ctx);
  registerServeCommands(program, ctx);
  registerTeamCommands(program, ctx);
  registerUsageCommands(program, ctx);
  registerHostCommands(program, ctx);
  registerWorkerCommands(program, ctx);
  return program;
}

/** Parses and runs; never throws: returns the exit status. */
export async function runCli(argv: readonly string[], ctx: CliContext): Promise<number> {
  const program = buildProgram(ctx);
  try {
    await program.parseAsync([...argv], { from: "user" });
    return ctx.exitCode;
  } catch (err) {
    if (err instanceof CommanderError) return commanderExitCode(err);
    const { line, exitCode } = describeError(err);
    ctx.stderr.write(`${line}\n`);
    return exitCode;
  }
}

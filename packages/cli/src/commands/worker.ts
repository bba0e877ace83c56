import { hostname } from "node:os";
import { ACCEL_CHOICES, type AccelChoice, HostName } from "@sandtree/protocol";
import { type Command, InvalidArgumentError, Option } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { VERSION } from "../version.js";
import { loadServerModule } from "./serve.js";

interface WorkerFlags {
  join: string;
  joinToken?: string;
  dataDir?: string;
  name?: string;
  accel?: AccelChoice;
}

function hostNameArg(input: string): string {
  const r = HostName.safeParse(input);
  if (!r.success) throw new InvalidArgumentError(r.error.issues[0]?.message ?? "invalid host name");
  return input;
}

/**
 * `sandtree worker`: joins a control plane and heartbeats until SIGTERM/SIGINT. What it does
 * today is said in its help: it reports capacity and locality; it runs no sandboxes yet.
 */
export function registerWorkerCommands(program: Command, ctx: CliContext): void {
  program
    .command("worker")
    .description(
      "join a control plane as a fleet host: registers this machine's capacity and cached images, then heartbeats " +
        "until stopped (running sandboxes on remote workers is not built yet: the control plane places nothing here)",
    )
    .requiredOption("--join <url>", "the control plane's URL, e.g. http://10.0.0.5:7070")
    .option("--join-token <token>", "the join token `sandtree serve` printed (default: $SANDTREE_JOIN_TOKEN)")
    .option("--data-dir <dir>", "where this host's sandboxes would live; its free disk is reported (default: $SANDTREE_DATA_DIR)")
    .option("--name <name>", "this host's name in the fleet (default: the machine's hostname)", hostNameArg)
    .addOption(
      new Option("--accel <mode>", "VM acceleration reported (default: $SANDTREE_ACCEL, then auto)").choices([...ACCEL_CHOICES]),
    )
    .action(async (o: WorkerFlags) => {
      const joinToken = o.joinToken ?? ctx.env.SANDTREE_JOIN_TOKEN;
      if (!joinToken)
        throw new UsageError("--join-token (or SANDTREE_JOIN_TOKEN) is required: the token `sandtree serve` printed");
      const name = o.name ?? hostname().split(".")[0] ?? "worker";
      if (!HostName.safeParse(name).success)
        throw new UsageError(`this machine's hostname ${name} is not a valid host name: pass --name`);
      const mod = await loadServerModule("worker");
      const dataDir = o.dataDir ?? ctx.env.SANDTREE_DATA_DIR;
      const cacheDir = ctx.env.SANDTREE_CACHE_DIR;
      const accel = o.accel ?? (ctx.env.SANDTREE_ACCEL as AccelChoice | undefined);
      const { agent, joined } = await mod.runWorker({
        joinUrl: o.join,
        joinToken,
        name,
        version: VERSION,
        ...(dataDir ? { dataDir } : {}),
        ...(cacheDir ? { cacheDir } : {}),
        ...(accel ? { accel } : {}),
        log: (line) => ctx.stderr.write(`${line}\n`),
      });
      ctx.stdout.write(
        `joined ${o.join} as ${joined.name} (${joined.host_id}); heartbeating every ${joined.heartbeat_interval_ms} ms until SIGTERM\n` +
          "note: this host reports capacity and images only; running sandboxes on remote workers is not built yet\n",
      );
      await new Promise<void>((resolve) => {
        const stop = () => {
          process.off("SIGINT", stop);
          process.off("SIGTERM", stop);
          void agent.stop().then(resolve, resolve);
        };
        process.on("SIGINT", stop);
        process.on("SIGTERM", stop);
      });
      ctx.stdout.write(`stopped after ${agent.beats} heartbeats\n`);
    });
}

import { createInterface } from "node:readline/promises";
import type { Checkpoint } from "@sandtree/protocol";
import { type Command, Option } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { parseIntArg, parseNumberArg } from "../kv.js";
import { formatAge, formatBytes, type OutputFormat, printResult, renderFields, renderTable } from "../output.js";
import { withSpinner } from "../progress.js";
import { printCreated, waitRunning } from "./sandbox-wait.js";
import { addListCommand, addOneCommand, globalFlags, MIN_MEMORY_GB, outputOption } from "./shared.js";

interface ChildFlags {
  name?: string;
  cpuCores?: number;
  memoryGb?: number;
  timeoutMinutes?: number;
  volumes?: "shared" | "snapshot";
  waitTimeout: number;
  output: OutputFormat;
}

/** Refuses to act without -y when there is no terminal to ask on; asks when there is. */
async function confirm(ctx: CliContext, question: string, yes: boolean | undefined): Promise<boolean> {
  if (yes) return true;
  if (!ctx.stdin.isTTY || !ctx.stderr.isTTY) throw new UsageError("refusing without -y (no terminal to ask on)");
  const rl = createInterface({ input: ctx.stdin, output: ctx.stderr });
  const answer = await rl.question(`${question} [y/N] `);
  rl.close();
  return /^y(es)?$/i.test(answer.trim());
}

function checkpointFields(c: Checkpoint): Array<[string, string]> {
  return [
    ["id", c.id],
    ["state", c.state + (c.error ? ` (${c.error})` : "")],
    ["sandbox", c.sandbox_id],
    ["parent", c.parent_id ?? "-"],
    ["depth", String(c.depth)],
    ["image", c.image],
    ["disk", formatBytes(c.disk_size_bytes)],
    ["stored", formatBytes(c.stored_bytes)],
    ["created", c.created_at],
    ["expires", c.expires_at ?? "-"],
  ];
}

const childOptions = (cmd: Command) =>
  cmd
    .option("--name <name>", "name of the new sandbox")
    .option("--cpu-cores <n>", "virtual CPUs (default: the source's)", parseIntArg("--cpu-cores"))
    .option("--memory-gb <gb>", "memory in GiB (default: the source's)", parseNumberArg("--memory-gb", MIN_MEMORY_GB))
    .option("--timeout-minutes <m>", "lifetime of the new sandbox (default: the source's)", parseNumberArg("--timeout-minutes"))
    .addOption(
      new Option("--volumes <mode>", "the source's volumes: shared (default) or a copy-on-write snapshot of each").choices([
        "shared",
        "snapshot",
      ]),
    )
    .option("--wait-timeout <seconds>", "how long to wait", parseIntArg("--wait-timeout"), 300)
    // Creating never needs confirming; -y is still accepted from older scripts.
    .addOption(new Option("-y, --yes").hideHelp());

export function registerCheckpointCommands(sandbox: Command, ctx: CliContext): void {
  const checkpoint = sandbox.command("checkpoint").description("save a sandbox's files and restore or fork from them");

  checkpoint
    .command("create")
    .description("checkpoint a sandbox's filesystem; prints the checkpoint id")
    .argument("<id>", "sandbox id")
    .option("--ttl-seconds <s>", "delete the checkpoint this long after creation", parseIntArg("--ttl-seconds"))
    .option("--memory", "save memory and processes too (restores resume them running)")
    .option("--wait", "wait until it is DURABLE")
    .addOption(outputOption())
    .action(
      async (id: string, o: { ttlSeconds?: number; memory?: boolean; wait?: boolean; output: OutputFormat }, cmd: Command) => {
        const client = await ctx.client(globalFlags(cmd));
        let c = await client.checkpoints.create(id, {
          ...(o.ttlSeconds !== undefined ? { ttlSeconds: o.ttlSeconds } : {}),
          ...(o.memory ? { includeMemory: true } : {}),
        });
        if (o.wait) {
          c = await withSpinner(ctx.stderr, `waiting for ${c.id}`, () => client.checkpoints.waitForCheckpoint(c.id));
        }
        printResult(ctx.stdout, o.output, c, `${c.id}\n`);
      },
    );

  addListCommand(checkpoint, ctx, {
    description: "list a sandbox's checkpoints (or the team's, without an id)",
    argument: ["[id]", "sandbox id"],
    key: "checkpoints",
    fetch: (client, id) => client.checkpoints.list(id),
    table: (list) =>
      renderTable(
        ["ID", "STATE", "SANDBOX", "PARENT", "DEPTH", "STORED", "AGE"],
        list.map((c) => [
          c.id,
          c.state,
          c.sandbox_id,
          c.parent_id ?? "-",
          String(c.depth),
          formatBytes(c.stored_bytes),
          formatAge(c.created_at),
        ]),
      ),
  });

  addOneCommand(checkpoint, ctx, {
    name: "get",
    description: "show one checkpoint",
    argument: ["<cid>", "checkpoint id"],
    call: (client, cid) => client.checkpoints.get(cid),
    text: (c) => renderFields(checkpointFields(c)),
  });

  childOptions(checkpoint.command("restore").description("start a new sandbox from a checkpoint; prints its id"))
    .argument("<cid>", "checkpoint id")
    .option("--wait", "wait until the new sandbox is RUNNING (progress on stderr)")
    .addOption(outputOption())
    .action(async (cid: string, o: ChildFlags & { wait?: boolean }, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      const sb = await client.sandboxes.create({
        checkpoint_id: cid,
        ...(o.name !== undefined ? { name: o.name } : {}),
        ...(o.cpuCores !== undefined ? { cpu_cores: o.cpuCores } : {}),
        ...(o.memoryGb !== undefined ? { memory_gb: o.memoryGb } : {}),
        ...(o.timeoutMinutes !== undefined ? { timeout_minutes: o.timeoutMinutes } : {}),
        ...(o.volumes !== undefined ? { volumes: o.volumes } : {}),
      });
      await printCreated(ctx, client, sb, o);
    });

  checkpoint
    .command("delete")
    .alias("rm")
    .description("delete a checkpoint (asks first on a terminal; -y to skip); prints its id")
    .argument("<cid>", "checkpoint id")
    .option("-y, --yes", "do not ask")
    .addOption(outputOption())
    .action(async (cid: string, o: { yes?: boolean; output: OutputFormat }, cmd: Command) => {
      if (!(await confirm(ctx, `delete checkpoint ${cid}?`, o.yes))) {
        ctx.stderr.write("not deleted\n");
        ctx.exitCode = 1;
        return;
      }
      const c = await (await ctx.client(globalFlags(cmd))).checkpoints.delete(cid);
      printResult(ctx.stdout, o.output, c, `${c.id}\n`);
    });

  childOptions(
    sandbox.command("fork").description("checkpoint a sandbox, start a child (it does not wait for the seal); prints its id"),
  )
    .argument("<id>", "sandbox id")
    .option("--memory", "fork with memory: children resume the parent's running processes")
    .option("--count <n>", "start this many children from one checkpoint", parseIntArg("--count"))
    .option("--wait", "wait until the children are RUNNING (progress on stderr)")
    .option("--host <name>", "start the children on this fleet host (admin keys only; `sandtree host list`)")
    .addOption(outputOption())
    .action(
      async (id: string, o: ChildFlags & { memory?: boolean; count?: number; wait?: boolean; host?: string }, cmd: Command) => {
        const client = await ctx.client(globalFlags(cmd));
        const opts = {
          ...(o.name !== undefined ? { name: o.name } : {}),
          ...(o.cpuCores !== undefined ? { cpuCores: o.cpuCores } : {}),
          ...(o.memoryGb !== undefined ? { memoryGb: o.memoryGb } : {}),
          ...(o.timeoutMinutes !== undefined ? { timeoutMinutes: o.timeoutMinutes } : {}),
          ...(o.memory ? { memory: true } : {}),
          ...(o.volumes !== undefined ? { volumes: o.volumes } : {}),
          ...(o.host !== undefined ? { host: o.host } : {}),
          waitTimeoutMs: o.waitTimeout * 1000,
        };
        let children = await withSpinner(ctx.stderr, `forking ${id}`, async () =>
          o.count === undefined
            ? [await client.sandboxes.fork(id, opts)]
            : (await client.sandboxes.forkMany(id, o.count, opts)).sandboxes,
        );
        if (o.wait) {
          const running = await waitRunning(
            ctx,
            client,
            children.map((c) => c.id),
            o.waitTimeout,
          );
          if (running.length < children.length) return;
          children = running;
        }
        printResult(
          ctx.stdout,
          o.output,
          o.count === undefined ? children[0] : children,
          children.map((c) => `${c.id}\n`).join(""),
        );
      },
    );

  sandbox
    .command("reset")
    .description("put a running sandbox back to a memory checkpoint's state, keeping its id")
    .argument("<id>", "sandbox id")
    .requiredOption("--checkpoint <cid>", "a memory checkpoint (made with --memory)")
    .addOption(outputOption())
    .action(async (id: string, o: { checkpoint: string; output: OutputFormat }, cmd: Command) => {
      const sb = await (await ctx.client(globalFlags(cmd))).sandboxes.reset(id, o.checkpoint);
      printResult(ctx.stdout, o.output, sb, `${sb.id}\n`);
    });
}

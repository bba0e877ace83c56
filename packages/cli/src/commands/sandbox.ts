import { createInterface } from "node:readline/promises";
import { SANDBOX_STATUSES, type Sandbox, type SandboxStatus } from "@sandtree/protocol";
import type { CreateSandboxInput } from "@sandtree/sdk";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { describeError, UsageError } from "../errors.js";
import { collectKeyValue, parseIntArg, parseNumberArg } from "../kv.js";
import { formatAge, formatLabels, type OutputFormat, printJson, renderFields, renderTable } from "../output.js";
import { registerCheckpointCommands } from "./sandbox-checkpoint.js";
import { parseDisplay, registerDesktopCommands } from "./sandbox-desktop.js";
import { registerTransferCommands } from "./sandbox-files.js";
import { registerJobCommands } from "./sandbox-jobs.js";
import { collectList, collectTunnel, registerNetworkCommand } from "./sandbox-network.js";
import { registerPortCommands } from "./sandbox-ports.js";
import { registerRunCommand } from "./sandbox-run.js";
import { registerSshCommand } from "./sandbox-ssh.js";
import { printCreated, registerWaitCommand } from "./sandbox-wait.js";
import { addOneCommand, choice, globalFlags, MIN_MEMORY_GB, outputOption } from "./shared.js";

interface ListFlags {
  status?: SandboxStatus;
  label?: Record<string, string>;
  host?: string;
  limit?: number;
  cursor?: string;
  all?: boolean;
  output: OutputFormat;
}

interface CreateFlags {
  name?: string;
  cpuCores?: number;
  memoryGb?: number;
  diskSizeGb?: number;
  env?: Record<string, string>;
  secret?: Record<string, string>;
  timeoutMinutes?: number;
  idleTimeoutMinutes?: number;
  checkpoint?: string;
  label?: Record<string, string>;
  startCommand?: string;
  allow?: string[];
  deny?: string[];
  tunnel?: Record<string, string>;
  network: boolean;
  display?: { width: number; height: number };
  nestedVirt?: boolean;
  host?: string;
  wait?: boolean;
  waitTimeout: number;
  output: OutputFormat;
}

export function registerSandboxCommands(program: Command, ctx: CliContext): void {
  const sandbox = program.command("sandbox").description("create, inspect, use and delete sandboxes");

  sandbox
    .command("create")
    .description("create a sandbox from an image (or from a checkpoint with --checkpoint); prints its id")
    .argument("[image]", "image reference, e.g. sandtree/debian or localhost:5000/team/tool:1.2")
    .option("--checkpoint <cid>", "restore this checkpoint instead of an image (its image and disk come along)")
    .option("--name <name>", "a name (1-63 letters, digits, '.', '_', '-')")
    .option("--cpu-cores <n>", "virtual CPUs", parseIntArg("--cpu-cores"))
    .option(
      "--memory-gb <gb>",
      `memory in GiB (fractions allowed, >= ${MIN_MEMORY_GB})`,
      parseNumberArg("--memory-gb", MIN_MEMORY_GB),
    )
    .option("--disk-size-gb <gb>", "root disk size in GiB", parseIntArg("--disk-size-gb"))
    .option("-e, --env <K=V>", "environment variable (repeatable)", collectKeyValue)
    .option("--secret <K=V>", "secret environment variable: encrypted at rest, shown as *** (repeatable)", collectKeyValue)
    .option("--label <K=V>", "label (repeatable)", collectKeyValue)
    .option(
      "--timeout-minutes <m>",
      "hard lifetime: the server ends the sandbox (TIMEOUT) after this long",
      parseNumberArg("--timeout-minutes"),
    )
    .option(
      "--idle-timeout-minutes <m>",
      "end the sandbox after this long without activity",
      parseNumberArg("--idle-timeout-minutes"),
    )
    .option("--start-command <cmd>", "command started when the sandbox boots")
    .option("--allow <rules>", "egress only to these hostnames, *.domains, IPs, CIDRs (comma-separated, repeatable)", collectList)
    .option("--deny <rules>", "egress anywhere but these (comma-separated, repeatable)", collectList)
    .option(
      "--tunnel <NAME=HOST:PORT>",
      "reach HOST:PORT (from the server) at NAME.sandtree.internal:PORT (repeatable)",
      collectTunnel,
    )
    .option("--no-network", "no network interface at all")
    .option("--display <WxH>", "a desktop's display, e.g. 1280x800 (image sandtree/desktop)", parseDisplay)
    .option("--nested-virt", "hardware virtualization inside the sandbox: /dev/kvm for VMs of its own")
    .option("--host <name>", "run it on this fleet host (admin keys only; `sandtree host list`)")
    .option("--wait", "wait until the sandbox is RUNNING (progress on stderr)")
    .option("--wait-timeout <seconds>", "give up waiting after this long", parseIntArg("--wait-timeout"), 300)
    .addOption(outputOption())
    .action(async (image: string | undefined, o: CreateFlags, cmd: Command) => {
      if ((image === undefined) === (o.checkpoint === undefined))
        throw new UsageError("give an image or --checkpoint CID (not both)");
      if (o.checkpoint !== undefined && o.diskSizeGb !== undefined)
        throw new UsageError("--disk-size-gb comes from the checkpoint");
      const client = await ctx.client(globalFlags(cmd));
      const request: CreateSandboxInput = {
        ...(image !== undefined ? { image } : { checkpoint_id: o.checkpoint ?? "" }),
        ...(o.name !== undefined ? { name: o.name } : {}),
        ...(o.cpuCores !== undefined ? { cpu_cores: o.cpuCores } : {}),
        ...(o.memoryGb !== undefined ? { memory_gb: o.memoryGb } : {}),
        ...(o.diskSizeGb !== undefined ? { disk_size_gb: o.diskSizeGb } : {}),
        ...(o.env !== undefined ? { environment_vars: o.env } : {}),
        ...(o.secret !== undefined ? { secrets: o.secret } : {}),
        ...(o.timeoutMinutes !== undefined ? { timeout_minutes: o.timeoutMinutes } : {}),
        ...(o.idleTimeoutMinutes !== undefined ? { idle_timeout_minutes: o.idleTimeoutMinutes } : {}),
        ...(o.label !== undefined ? { labels: o.label } : {}),
        ...(o.startCommand !== undefined ? { start_command: o.startCommand } : {}),
        ...(o.allow !== undefined ? { network_allowlist: o.allow } : {}),
        ...(o.deny !== undefined ? { network_denylist: o.deny } : {}),
        ...(o.tunnel !== undefined ? { tunnels: o.tunnel } : {}),
        ...(o.network ? {} : { network: false }),
        ...(o.display !== undefined ? { display: o.display } : {}),
        ...(o.nestedVirt ? { nested_virtualization: true } : {}),
        ...(o.host !== undefined ? { host: o.host } : {}),
      };
      const sb = await client.sandboxes.create(request);
      await printCreated(ctx, client, sb, o);
    });

  sandbox
    .command("list")
    .alias("ls")
    .description("list sandboxes, newest first: one page (--limit, --cursor), or every page with --all")
    .option("--status <status>", `only this status (${SANDBOX_STATUSES.join(", ")})`, choice("--status", SANDBOX_STATUSES))
    .option("--label <K=V>", "only sandboxes with this label (repeatable)", collectKeyValue)
    .option("--host <name>", "only sandboxes on this fleet host (admin keys only; `sandtree host list`)")
    .option("--limit <n>", "sandboxes per page (server default 100, at most 1000)", parseIntArg("--limit"))
    .option("--cursor <cursor>", "start at this page (a next_cursor of an earlier answer)")
    .option("--all", "follow next_cursor to the last page")
    .addOption(outputOption())
    .action(async (o: ListFlags, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      const filters = {
        ...(o.status ? { status: o.status } : {}),
        ...(o.label ? { labels: o.label } : {}),
        ...(o.host !== undefined ? { host: o.host } : {}),
        ...(o.limit !== undefined ? { limit: o.limit } : {}),
      };
      // The API's answer, { sandboxes, next_cursor }; with --all every page's, next_cursor null.
      const page = await client.sandboxes.list({ ...filters, ...(o.cursor !== undefined ? { cursor: o.cursor } : {}) });
      const sandboxes = [...page.sandboxes];
      let next = page.next_cursor;
      while (o.all && next !== null) {
        const more = await client.sandboxes.list({ ...filters, cursor: next });
        sandboxes.push(...more.sandboxes);
        next = more.next_cursor;
      }
      if (o.output === "json") return printJson(ctx.stdout, { sandboxes, next_cursor: next });
      ctx.stdout.write(sandboxTable(sandboxes));
      if (next !== null) ctx.stderr.write(`more on the next page: --cursor ${next} (or --all for every page)\n`);
    });

  addOneCommand(sandbox, ctx, {
    name: "get",
    description: "show one sandbox",
    argument: ["<id>"],
    call: (client, id) => client.sandboxes.get(id),
    text: sandboxFields,
  });

  sandbox
    .command("delete")
    .alias("rm")
    .description("terminate sandboxes by id, or every one with the given labels (asks first on a terminal; -y to skip)")
    .argument("[ids...]")
    .option("--label <K=V>", "delete every running sandbox with this label instead (repeatable: all must match)", collectKeyValue)
    .option("-y, --yes", "do not ask")
    .addOption(outputOption())
    .action(async (ids: string[], o: { yes?: boolean; label?: Record<string, string>; output: OutputFormat }, cmd: Command) => {
      if (ids.length > 0 === (o.label !== undefined)) throw new UsageError("give sandbox ids or --label K=V (not both)");
      const what = o.label ? `every sandbox labelled ${formatLabels(o.label)}` : `${ids.length} sandbox(es): ${ids.join(", ")}`;
      if (!o.yes) {
        if (!ctx.stdin.isTTY || !ctx.stderr.isTTY) throw new UsageError("refusing to delete without -y (no terminal to ask on)");
        const rl = createInterface({ input: ctx.stdin, output: ctx.stderr });
        const answer = await rl.question(`delete ${what}? [y/N] `);
        rl.close();
        if (!/^y(es)?$/i.test(answer.trim())) {
          ctx.stderr.write("not deleted\n");
          ctx.exitCode = 1;
          return;
        }
      }
      const client = await ctx.client(globalFlags(cmd));
      if (o.label) {
        const r = await client.sandboxes.bulkDelete({ labels: o.label });
        if (o.output === "json") printJson(ctx.stdout, r.deleted);
        else for (const id of r.deleted) ctx.stdout.write(`${id}\n`);
        if (r.deleted.length === 0) ctx.stderr.write(`no running sandbox is labelled ${formatLabels(o.label)}\n`);
        return;
      }
      const deleted: string[] = [];
      for (const id of ids) {
        try {
          await client.sandboxes.delete(id);
          deleted.push(id);
          if (o.output !== "json") ctx.stdout.write(`${id}\n`);
        } catch (err) {
          ctx.stderr.write(`${describeError(err).line}\n`);
          ctx.exitCode = 1;
        }
      }
      if (o.output === "json") printJson(ctx.stdout, deleted);
    });

  for (const verb of ["pause", "resume"] as const) {
    addOneCommand(sandbox, ctx, {
      name: verb,
      description:
        verb === "pause"
          ? "stop a sandbox's CPUs, keeping memory and disk; prints its id"
          : "continue a paused sandbox; prints its id",
      argument: ["<id>"],
      call: (client, id) => (verb === "pause" ? client.sandboxes.pause(id) : client.sandboxes.resume(id)),
      text: (sb) => `${sb.id}\n`,
    });
  }

  sandbox
    .command("logs")
    .description("print a sandbox's lifecycle events (boot progress), then its console output")
    .argument("<id>")
    .option("--tail-bytes <n>", "how much of the console to fetch", parseIntArg("--tail-bytes"))
    .option("--events", "print only the lifecycle events")
    .option("--console", "print only the console output")
    .addOption(outputOption())
    .action(
      async (id: string, o: { tailBytes?: number; events?: boolean; console?: boolean; output: OutputFormat }, cmd: Command) => {
        if (o.events && o.console) throw new UsageError("give --events or --console (without either: both)");
        const client = await ctx.client(globalFlags(cmd));
        const logs = await client.sandboxes.logs(id, o.tailBytes !== undefined ? { tailBytes: o.tailBytes } : {});
        if (o.output === "json") return printJson(ctx.stdout, logs);
        if (!o.console) for (const e of logs.events) ctx.stdout.write(`${e.at}  ${e.message}\n`);
        if (o.events) return;
        if (!o.console) ctx.stdout.write("--- console ---\n");
        if (logs.console_truncated) ctx.stderr.write("(console truncated: showing its end)\n");
        ctx.stdout.write(logs.console);
        if (logs.console !== "" && !logs.console.endsWith("\n")) ctx.stdout.write("\n");
      },
    );

  registerRunCommand(sandbox, ctx);
  registerSshCommand(sandbox, ctx);
  registerJobCommands(sandbox, ctx);
  registerTransferCommands(sandbox, ctx);
  registerCheckpointCommands(sandbox, ctx);
  registerPortCommands(sandbox, ctx);
  registerDesktopCommands(sandbox, ctx);
  registerNetworkCommand(sandbox, ctx);
  registerWaitCommand(sandbox, ctx);
}

export function sandboxTable(sandboxes: readonly Sandbox[], now = Date.now()): string {
  // Admin keys see where each runs: a HOST column then.
  const hosts = sandboxes.some((s) => s.host !== undefined);
  return renderTable(
    ["ID", "NAME", "IMAGE", "STATUS", "CPU", "MEM", "DISK", "AGE", ...(hosts ? ["HOST"] : []), "LABELS"],
    sandboxes.map((s) => [
      s.id,
      s.name ?? "-",
      s.image,
      s.status,
      String(s.cpu_cores),
      `${s.memory_gb}G`,
      `${s.disk_size_gb}G`,
      formatAge(s.created_at, now),
      ...(hosts ? [s.host ?? "-"] : []),
      formatLabels(s.labels),
    ]),
  );
}

function sandboxFields(s: Sandbox): string {
  const env = Object.entries(s.environment_vars).map(([k, v]) => `${k}=${v}`);
  return renderFields([
    ["id", s.id],
    ["name", s.name ?? "-"],
    ["status", s.status],
    ...(s.error_reason ? [["error", s.error_code ? `${s.error_code}: ${s.error_reason}` : s.error_reason] as const] : []),
    ["image", s.image_digest ? `${s.image} (${s.image_digest})` : s.image],
    ["resources", `${s.cpu_cores} cpu, ${s.memory_gb} GiB memory, ${s.disk_size_gb} GiB disk`],
    ["accel", s.nested_virtualization ? `${s.accel ?? "-"} (nested virtualization)` : (s.accel ?? "-")],
    ...(s.host !== undefined ? [["host", s.host ?? "-"] as const] : []),
    ["labels", formatLabels(s.labels)],
    ["env", env.length > 0 ? env.join(" ") : "-"],
    ["start command", s.start_command ?? "-"],
    ...(s.display ? [["display", s.display] as const] : []),
    ["created", s.created_at],
    ["started", s.started_at ?? "-"],
    ["terminated", s.terminated_at ?? "-"],
  ]);
}

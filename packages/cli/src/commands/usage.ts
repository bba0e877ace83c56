import { USAGE_GROUPS, type UsageAmounts, type UsageGroup, type UsageReport } from "@sandtree/protocol";
import { type Command, InvalidArgumentError, Option } from "commander";
import type { CliContext } from "../context.js";
import { printJson, renderTable } from "../output.js";
import { globalFlags } from "./shared.js";

/** `--from` / `--to`: an ISO 8601 time, or a date (midnight UTC). */
export function parseTime(flag: string): (input: string) => string {
  return (input) => {
    const iso = /^\d{4}-\d{2}-\d{2}$/.test(input) ? `${input}T00:00:00Z` : input;
    if (!/^\d{4}-\d{2}-\d{2}T/.test(iso) || Number.isNaN(Date.parse(iso))) {
      throw new InvalidArgumentError(`${flag} takes a date (2026-12-01) or an ISO 8601 time (2026-12-01T08:00:00Z)`);
    }
    return new Date(Date.parse(iso)).toISOString();
  };
}

/** Six decimals: the API's amounts are unrounded; rounding to cents belongs to whoever bills. */
const money = (usd: number) => usd.toFixed(6);
const num = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(3));

export function usageTable(r: UsageReport): string {
  const row = (key: string, a: UsageAmounts) => [
    key,
    num(a.vcpu_seconds),
    num(a.memory_gib_seconds),
    num(a.disk_gib_seconds),
    num(a.checkpoint_gib_hours),
    num(a.volume_gib_hours ?? 0),
    money(a.cost_usd),
  ];
  return renderTable(
    [
      r.group_by.toUpperCase(),
      "VCPU_SECONDS",
      "MEMORY_GIB_SECONDS",
      "DISK_GIB_SECONDS",
      "CHECKPOINT_GIB_HOURS",
      "VOLUME_GIB_HOURS",
      "COST_USD",
    ],
    [...r.lines.map((l) => row(l.key, l)), row("TOTAL", r.total)],
  );
}

/** `sandtree usage`: metered usage and cost of the key's team (an admin key: every team). */
export function registerUsageCommands(program: Command, ctx: CliContext): void {
  program
    .command("usage")
    .description("metered usage and cost per day, hour, label, sandbox or team (default: this month, by day)")
    .option("--from <time>", "start (a date or ISO time; default: the start of this UTC month)", parseTime("--from"))
    .option("--to <time>", "end, exclusive (default: now)", parseTime("--to"))
    .addOption(new Option("--by <group>", "what each line is").choices([...USAGE_GROUPS]).default("day"))
    .option("--label-key <key>", "with --by label: the label whose values make the lines")
    .addOption(new Option("-o, --output <format>", "table, json or csv").choices(["table", "json", "csv"]).default("table"))
    .action(
      async (
        o: { from?: string; to?: string; by: UsageGroup; labelKey?: string; output: "table" | "json" | "csv" },
        cmd: Command,
      ) => {
        const client = await ctx.client(globalFlags(cmd));
        const q = {
          group_by: o.by,
          ...(o.from ? { from: o.from } : {}),
          ...(o.to ? { to: o.to } : {}),
          ...(o.labelKey ? { label_key: o.labelKey } : {}),
        };
        if (o.output === "csv") return void ctx.stdout.write(await client.usage.csv(q));
        const report = await client.usage.get(q);
        if (o.output === "json") return printJson(ctx.stdout, report);
        ctx.stdout.write(`usage ${report.from} to ${report.to} (USD)\n`);
        ctx.stdout.write(usageTable(report));
      },
    );
}

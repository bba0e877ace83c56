import type { ApiKey, Team, TeamLimits, UpdateTeamLimitsRequest } from "@sandtree/protocol";
import { type Command, InvalidArgumentError } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { formatAge, type OutputFormat, printJson, renderFields, renderTable } from "../output.js";
import { addListCommand, addOneCommand, globalFlags, outputOption } from "./shared.js";

const LIMIT_NAMES = [
  "max_active_sandboxes",
  "max_vcpus",
  "max_memory_gb",
  "max_storage_gb",
  "max_creations_per_hour",
  "max_creations_per_10s",
  "max_volumes",
  "max_volume_gb",
  "sandbox_disk_mbps",
  "sandbox_disk_iops",
  "sandbox_net_mbit",
] as const satisfies ReadonlyArray<keyof TeamLimits>;

/** `--set NAME=VALUE` (repeatable); VALUE `default` restores the default. */
function collectLimit(input: string, prev: UpdateTeamLimitsRequest = {}): UpdateTeamLimitsRequest {
  const eq = input.indexOf("=");
  const name = input.slice(0, eq) as (typeof LIMIT_NAMES)[number];
  const raw = input.slice(eq + 1);
  if (eq <= 0 || !LIMIT_NAMES.includes(name)) {
    throw new InvalidArgumentError(`--set takes NAME=VALUE with NAME one of ${LIMIT_NAMES.join(", ")}`);
  }
  const value = raw === "default" ? null : Number(raw);
  if (value !== null && !(Number.isFinite(value) && value >= 0)) {
    throw new InvalidArgumentError(`--set ${name}: ${raw} is not a number >= 0 (or "default")`);
  }
  return { ...prev, [name]: value };
}

function parseUsd(input: string): number {
  const v = Number(input);
  if (!(input.trim() !== "" && Number.isFinite(v) && v >= 0))
    throw new InvalidArgumentError(`--usd: ${input} is not an amount >= 0`);
  return v;
}

/** `sandtree team ...` and `sandtree key ...`: admin commands over teams, limits and API keys. */
export function registerTeamCommands(program: Command, ctx: CliContext): void {
  const team = program.command("team").description("teams and their limits (admin key)");

  addOneCommand(team, ctx, {
    name: "create",
    description: "create a team",
    argument: ["<name>", "team name (1-63 letters, digits, '.', '_', '-')"],
    call: (client, name) => client.teams.create(name),
    text: (created) => `${created.name} ${created.id}\n`,
  });

  addListCommand(team, ctx, {
    description: "list teams",
    key: "teams",
    fetch: (client) => client.teams.list(),
    table: teamTable,
  });

  team
    .command("limits")
    .description("show a team's limits and usage; --set changes them")
    .argument("<name>", "team name")
    .option("--set <NAME=VALUE>", `change a limit (repeatable; VALUE "default" restores it)`, collectLimit)
    .addOption(outputOption())
    .action(async (name: string, o: { set?: UpdateTeamLimitsRequest; output: OutputFormat }, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      const r = o.set ? await client.teams.setLimits(name, o.set) : await client.teams.getLimits(name);
      if (o.output === "json") return printJson(ctx.stdout, r);
      // Per-sandbox rates have no team-wide usage.
      const usage: Partial<Record<(typeof LIMIT_NAMES)[number], number>> = {
        max_active_sandboxes: r.usage.active_sandboxes,
        max_vcpus: r.usage.vcpus,
        max_memory_gb: r.usage.memory_gb,
        max_storage_gb: r.usage.storage_gb,
        max_creations_per_hour: r.usage.creations_last_hour,
        max_creations_per_10s: r.usage.creations_last_10s,
        max_volumes: r.usage.volumes ?? 0,
        max_volume_gb: r.usage.volume_gb ?? 0,
      };
      ctx.stdout.write(
        renderTable(
          ["LIMIT", "USED", "MAX"],
          LIMIT_NAMES.map((n) => [n, String(usage[n] ?? "-"), String(r.limits[n])]),
        ),
      );
    });

  team
    .command("budget")
    .description("show a team's monthly budget and this month's cost; --usd sets it (admin), --none removes it")
    .argument("<name>", "team name")
    .option("--usd <amount>", "the monthly budget in USD", parseUsd)
    .option("--none", "remove the budget")
    .addOption(outputOption())
    .action(async (name: string, o: { usd?: number; none?: boolean; output: OutputFormat }, cmd: Command) => {
      if (o.usd !== undefined && o.none) throw new UsageError("give --usd or --none, not both");
      const client = await ctx.client(globalFlags(cmd));
      const r =
        o.usd !== undefined || o.none
          ? await client.teams.setBudget(name, o.none ? null : (o.usd ?? null))
          : await client.teams.getBudget(name);
      if (o.output === "json") return printJson(ctx.stdout, r);
      ctx.stdout.write(
        renderFields([
          ["team", r.team],
          ["monthly budget", r.monthly_budget_usd === null ? "none" : `$${r.monthly_budget_usd}`],
          ["month to date", `$${r.month_to_date_usd.toFixed(6)} (since ${r.month_start.slice(0, 10)})`],
        ]),
      );
    });

  const key = program.command("key").description("API keys (admin key)");

  key
    .command("create")
    .description("create an API key; prints it once")
    .requiredOption("--team <name>", "the team the key acts for")
    .option("--admin", "an admin key (manages teams and keys)")
    .addOption(outputOption())
    .action(async (o: { team: string; admin?: boolean; output: OutputFormat }, cmd: Command) => {
      const created = await (await ctx.client(globalFlags(cmd))).keys.create(o.team, { admin: o.admin ?? false });
      if (o.output === "json") return printJson(ctx.stdout, created);
      ctx.stdout.write(
        renderFields([
          ["id", created.id],
          ["team", created.team],
          ["admin", String(created.admin)],
          ["key", created.key],
        ]),
      );
      ctx.stderr.write("store the key now: it is not shown again\n");
    });

  addListCommand(key, ctx, {
    description: "list API keys (prefixes only)",
    key: "keys",
    fetch: (client) => client.keys.list(),
    table: keyTable,
  });

  addOneCommand(key, ctx, {
    name: "revoke",
    description: "revoke an API key (refused from its next request on); prints its id",
    argument: ["<id>", "key id (see `sandtree key list`)"],
    call: (client, id) => client.keys.revoke(id),
    text: (revoked) => `${revoked.id}\n`,
  });
}

export function teamTable(teams: readonly Team[], now = Date.now()): string {
  return renderTable(
    ["NAME", "ID", "AGE"],
    teams.map((t) => [t.name, t.id, formatAge(t.created_at, now)]),
  );
}

export function keyTable(keys: readonly ApiKey[], now = Date.now()): string {
  return renderTable(
    ["ID", "TEAM", "PREFIX", "ADMIN", "AGE", "REVOKED"],
    keys.map((k) => [
      k.id,
      k.team,
      `${k.prefix}...`,
      k.admin ? "yes" : "no",
      formatAge(k.created_at, now),
      k.revoked_at ? formatAge(k.revoked_at, now) : "-",
    ]),
  );
}

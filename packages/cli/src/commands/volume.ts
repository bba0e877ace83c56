import type { Volume } from "@sandtree/protocol";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { collectKeyValue, parseIntArg } from "../kv.js";
import {
  formatAge,
  formatBytes,
  formatLabels,
  type OutputFormat,
  printJson,
  printResult,
  renderFields,
  renderTable,
} from "../output.js";
import { addListCommand, addOneCommand, globalFlags, outputOption } from "./shared.js";

/** `sandtree volume create|list|get|delete` (docs/volumes.md). */
export function registerVolumeCommands(program: Command, ctx: CliContext): void {
  const volume = program.command("volume").description("create, list, show and delete volumes (storage that outlives sandboxes)");

  volume
    .command("create")
    .description("create a volume; prints its id")
    .argument("<name>", "a name unique in the team (1-63 letters, digits, '.', '_', '-')")
    .option("--size <gb>", "the most its files may hold, in GiB (default 10)", parseIntArg("--size"))
    .option("--label <K=V>", "label (repeatable)", collectKeyValue)
    .addOption(outputOption())
    .action(async (name: string, o: { size?: number; label?: Record<string, string>; output: OutputFormat }, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      const v = await client.volumes.create({
        name,
        ...(o.size !== undefined ? { size_gb: o.size } : {}),
        ...(o.label ? { labels: o.label } : {}),
      });
      printResult(ctx.stdout, o.output, v, `${v.id}\n`);
    });

  addListCommand(volume, ctx, {
    description: "list the team's volumes",
    key: "volumes",
    fetch: (client) => client.volumes.list(),
    table: (volumes) =>
      renderTable(
        ["ID", "NAME", "STATUS", "USED", "SIZE", "MOUNTED BY", "AGE"],
        volumes.map((v) => [
          v.id,
          v.name,
          v.status,
          formatBytes(v.used_bytes),
          `${v.size_gb} GiB`,
          String(v.mounted_by.length),
          formatAge(v.created_at),
        ]),
      ),
  });

  addOneCommand(volume, ctx, {
    name: "get",
    description: "show a volume (by id or name), its bytes measured again",
    argument: ["<volume>", "id or name"],
    call: (client, ref) => client.volumes.get(ref),
    text: volumeFields,
  });

  volume
    .command("delete")
    .alias("rm")
    .description("delete volumes and their files (refused while a sandbox mounts one); prints each id")
    .argument("<volumes...>", "ids or names")
    .addOption(outputOption())
    .action(async (refs: string[], o: { output: OutputFormat }, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      const deleted: string[] = [];
      for (const ref of refs) {
        await client.volumes.delete(ref);
        deleted.push(ref);
        if (o.output !== "json") ctx.stdout.write(`${ref}\n`);
      }
      if (o.output === "json") printJson(ctx.stdout, { deleted });
    });
}

function volumeFields(v: Volume): string {
  return renderFields([
    ["id", v.id],
    ["name", v.name],
    ["status", v.status],
    ["size", `${v.size_gb} GiB`],
    ["used", formatBytes(v.used_bytes)],
    ["labels", formatLabels(v.labels)],
    ["mounted by", v.mounted_by.join(", ") || "-"],
    ["created", v.created_at],
  ]);
}

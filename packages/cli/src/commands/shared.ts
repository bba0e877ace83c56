import type { SandtreeClient } from "@sandtree/sdk";
import { type Command, InvalidArgumentError, Option } from "commander";
import type { GlobalFlags } from "../config.js";
import type { CliContext } from "../context.js";
import { type OutputFormat, printJson } from "../output.js";

/** The global --api-url / --api-key, wherever they were given on the command line. */
export function globalFlags(cmd: Command): GlobalFlags {
  const all = cmd.optsWithGlobals<{ apiUrl?: string; apiKey?: string }>();
  return {
    ...(all.apiUrl !== undefined ? { apiUrl: all.apiUrl } : {}),
    ...(all.apiKey !== undefined ? { apiKey: all.apiKey } : {}),
  };
}

/** The server's smallest memory_gb (CreateSandboxRequest). */
export const MIN_MEMORY_GB = 0.125;

export function outputOption(): Option {
  return new Option("-o, --output <format>", "table (ids alone for what was created or changed) or json")
    .choices(["table", "json"])
    .default("table");
}

export function choice<T extends string>(name: string, values: readonly T[]): (input: string) => T {
  return (input) => {
    const v = input.toUpperCase() as T;
    if (!values.includes(v)) throw new InvalidArgumentError(`${name} must be one of ${values.join(", ")}`);
    return v;
  };
}

/**
 * A list command (`list`, alias `ls`, unless `name` says otherwise) under `parent`: fetches the
 * items with the client (given the command's one argument, when `argument` declares it) and prints
 * `{ [key]: items }` with `-o json`, else `table(items)`.
 */
export function addListCommand<T>(
  parent: Command,
  ctx: CliContext,
  o: {
    name?: string;
    description: string;
    argument?: [spec: string, description: string];
    key: string;
    fetch: (client: SandtreeClient, arg: string | undefined) => Promise<T[]>;
    table: (items: T[]) => string;
  },
): void {
  const list = parent.command(o.name ?? "list");
  if (!o.name) list.alias("ls");
  list.description(o.description);
  if (o.argument) list.argument(...o.argument);
  list.addOption(outputOption()).action(async (...args: unknown[]) => {
    const cmd = args[args.length - 1] as Command;
    const { output } = args[args.length - 2] as { output: OutputFormat };
    const arg = o.argument ? (args[0] as string | undefined) : undefined;
    const items = await o.fetch(await ctx.client(globalFlags(cmd)), arg);
    if (output === "json") return printJson(ctx.stdout, { [o.key]: items });
    ctx.stdout.write(o.table(items));
  });
}

/**
 * A command of one argument under `parent` that does one call with the client and prints its
 * answer: as JSON with `-o json`, else `text(answer)`.
 */
export function addOneCommand<T>(
  parent: Command,
  ctx: CliContext,
  o: {
    name: string;
    description: string;
    argument: [spec: string, description?: string];
    call: (client: SandtreeClient, arg: string) => Promise<T>;
    text: (answer: T) => string;
  },
): Command {
  return parent
    .command(o.name)
    .description(o.description)
    .argument(...o.argument)
    .addOption(outputOption())
    .action(async (arg: string, opts: { output: OutputFormat }, cmd: Command) => {
      const answer = await o.call(await ctx.client(globalFlags(cmd)), arg);
      if (opts.output === "json") return printJson(ctx.stdout, answer);
      ctx.stdout.write(o.text(answer));
    });
}

import path from "node:path";
import type { Image, ImageAlias, RegistryCredentials } from "@sandtree/protocol";
import type { Command } from "commander";
import type { CliContext, In } from "../context.js";
import { UsageError } from "../errors.js";
import { formatAge, formatBytes, type OutputFormat, printResult, renderTable } from "../output.js";
import { withSpinner } from "../progress.js";
import { addListCommand, addOneCommand, globalFlags, outputOption } from "./shared.js";

export function registerImageCommands(program: Command, ctx: CliContext): void {
  const image = program.command("image").description("list, pull and alias images");

  addListCommand(image, ctx, {
    description: "list images available on the server",
    key: "images",
    fetch: (client) => client.images.list(),
    table: imageTable,
  });

  image
    .command("pull")
    .description("pull an image from its registry")
    .argument("<ref>", "image reference, e.g. docker.io/library/alpine:3.20")
    .option("--username <user>", "registry user name (with --password-stdin)")
    .option("--password-stdin", "read the registry password from stdin")
    .addOption(outputOption())
    .action(async (ref: string, o: { username?: string; passwordStdin?: boolean; output: OutputFormat }, cmd: Command) => {
      const credentials = await readCredentials(o, ctx.stdin);
      const client = await ctx.client(globalFlags(cmd));
      const pulled = await withSpinner(ctx.stderr, `pulling ${ref}`, () =>
        client.images.pull(ref, credentials ? { credentials } : {}),
      );
      printResult(ctx.stdout, o.output, pulled, `${pulled.ref} ${pulled.digest}\n`);
    });

  image
    .command("import")
    .description("import an OCI image layout directory on the server's machine (admin key)")
    .argument("<dir>", "OCI layout directory (with index.json), e.g. from `skopeo copy ... oci:DIR:TAG`")
    .argument("<name>", "name to give the image, e.g. team/tool:1.0")
    .option("--layout-ref <ref>", "which image of the layout (ref name or digest)")
    .addOption(outputOption())
    .action(async (dir: string, name: string, o: { layoutRef?: string; output: OutputFormat }, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      const imported = await withSpinner(ctx.stderr, `importing ${dir}`, () =>
        client.images.import(path.resolve(dir), name, o.layoutRef ? { layoutRef: o.layoutRef } : {}),
      );
      printResult(ctx.stdout, o.output, imported, `${imported.ref} ${imported.digest}\n`);
    });

  image
    .command("alias")
    .description("make a name stand for an image in every create and pull (admin key), e.g. python:3.11-slim sandtree/debian")
    .argument("<name>", "the name users' code gives, e.g. python:3.11-slim")
    .argument("<image>", "the image it stands for (local or pullable now)")
    .addOption(outputOption())
    .action(async (name: string, target: string, o: { output: OutputFormat }, cmd: Command) => {
      const alias = await (await ctx.client(globalFlags(cmd))).images.setAlias(name, target);
      printResult(ctx.stdout, o.output, alias, `${alias.name} -> ${alias.target}\n`);
    });

  addListCommand(image, ctx, {
    name: "aliases",
    description: "list the image aliases",
    key: "aliases",
    fetch: (client) => client.images.listAliases(),
    table: aliasTable,
  });

  addOneCommand(image, ctx, {
    name: "unalias",
    description: "remove an image alias (admin key); prints its name. Sandboxes created through it keep their image",
    argument: ["<name>", "the alias"],
    call: async (client, name) => {
      await client.images.deleteAlias(name);
      return { name, deleted: true };
    },
    text: (r) => `${r.name}\n`,
  });
}

export function aliasTable(aliases: readonly ImageAlias[], now = Date.now()): string {
  return renderTable(
    ["NAME", "IMAGE", "AGE"],
    aliases.map((a) => [a.name, a.target, formatAge(a.created_at, now)]),
  );
}

async function readCredentials(
  o: { username?: string; passwordStdin?: boolean },
  stdin: In,
): Promise<RegistryCredentials | undefined> {
  if (o.username === undefined && !o.passwordStdin) return undefined;
  if (o.username === undefined || !o.passwordStdin) {
    throw new UsageError(
      '--username and --password-stdin go together (e.g. echo "$TOKEN" | sandtree image pull REF --username me --password-stdin)',
    );
  }
  if (stdin.isTTY) throw new UsageError('--password-stdin reads a pipe, e.g. echo "$TOKEN" | sandtree image pull ...');
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(Buffer.from(chunk as Uint8Array));
  const password = Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
  if (password === "") throw new UsageError("--password-stdin: stdin was empty");
  return { username: o.username, password };
}

export function imageTable(images: readonly Image[], now = Date.now()): string {
  return renderTable(
    ["REF", "DIGEST", "SOURCE", "SIZE", "AGE"],
    images.map((i) => [i.ref, shortDigest(i.digest), i.source, formatBytes(i.virtual_size_bytes), formatAge(i.created_at, now)]),
  );
}

function shortDigest(digest: string): string {
  const [algo, hex] = digest.split(":");
  return hex ? `${algo}:${hex.slice(0, 12)}` : digest;
}

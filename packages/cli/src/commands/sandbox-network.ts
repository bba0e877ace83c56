import type { SandboxNetwork, UpdateNetworkRequest } from "@sandtree/sdk";
import { type Command, InvalidArgumentError } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { type OutputFormat, printJson, renderFields } from "../output.js";
import { globalFlags, outputOption } from "./shared.js";

/** `a,b c` (repeatable) -> ["a", "b", "c"]. */
export function collectList(input: string, previous: string[] = []): string[] {
  const items = input
    .split(/[,\s]+/)
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) throw new InvalidArgumentError("expected a comma-separated list");
  return [...previous, ...items];
}

/** `NAME=HOST:PORT` (repeatable) -> {NAME: "HOST:PORT"}. */
export function collectTunnel(input: string, previous: Record<string, string> = {}): Record<string, string> {
  const m = /^([a-z0-9-]{1,32})=([A-Za-z0-9.-]+:\d{1,5})$/.exec(input.trim());
  if (!m?.[1] || !m[2]) throw new InvalidArgumentError("a tunnel is NAME=HOST:PORT (e.g. llm=127.0.0.1:8000)");
  return { ...previous, [m[1]]: m[2] };
}

const NETWORK_HELP = `
Rules are hostnames (pypi.org), wildcards (*.example.com: any name below example.com), IPv4
addresses and CIDRs. Hostname rules follow what the sandbox's own resolver answers, so they
hold when a name moves to new addresses. Without a list the server's default applies.

Examples:
  sandtree sandbox network sb-hzs3n4xqkrgpkpys                       # show
  sandtree sandbox network sb-hzs3n4xqkrgpkpys --allow pypi.org,files.pythonhosted.org
  sandtree sandbox network sb-hzs3n4xqkrgpkpys --deny '*.example.com' --deny 203.0.113.0/24
  sandtree sandbox network sb-hzs3n4xqkrgpkpys --default`;

export function printNetwork(ctx: CliContext, n: SandboxNetwork, output: OutputFormat): void {
  if (output === "json") {
    printJson(ctx.stdout, n);
    return;
  }
  ctx.stdout.write(
    renderFields([
      ["sandbox", n.sandbox_id],
      ["enabled", String(n.enabled)],
      ["address", n.address ?? "-"],
      ["gateway", n.gateway ?? "-"],
      ["mode", n.mode],
      ["allowlist", n.network_allowlist.join(", ") || "-"],
      ["denylist", n.network_denylist.join(", ") || "-"],
      ["tunnels", n.tunnels.map((t) => `${t.hostname} -> ${t.target}`).join(", ") || "-"],
      ["applied", String(n.applied)],
    ]),
  );
}

export function registerNetworkCommand(sandbox: Command, ctx: CliContext): void {
  sandbox
    .command("network")
    .description("show or change a sandbox's egress policy")
    .argument("<id>", "sandbox id")
    .option("--allow <rules>", "only these destinations (comma-separated, repeatable)", collectList)
    .option("--deny <rules>", "everything but these destinations (comma-separated, repeatable)", collectList)
    .option("--default", "back to the server's default policy")
    .addOption(outputOption())
    .addHelpText("after", NETWORK_HELP)
    .action(
      async (id: string, o: { allow?: string[]; deny?: string[]; default?: boolean; output: OutputFormat }, cmd: Command) => {
        const changes = [o.allow, o.deny, o.default].filter((x) => x !== undefined).length;
        if (changes > 1)
          throw new UsageError("give one of --allow, --deny or --default (a policy is an allowlist or a denylist)");
        const client = await ctx.client(globalFlags(cmd));
        if (changes === 0) return printNetwork(ctx, await client.sandboxes.network(id), o.output);
        const policy: UpdateNetworkRequest = o.allow
          ? { network_allowlist: o.allow }
          : o.deny
            ? { network_denylist: o.deny }
            : {};
        printNetwork(ctx, await client.sandboxes.setNetwork(id, policy), o.output);
      },
    );
}

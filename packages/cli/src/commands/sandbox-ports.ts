import type { ExposedPort } from "@sandtree/sdk";
import { type Command, InvalidArgumentError, Option } from "commander";
import type { CliContext } from "../context.js";
import { describeError } from "../errors.js";
import { parseIntArg } from "../kv.js";
import { formatAge, type OutputFormat, printJson, printResult, renderFields, renderTable } from "../output.js";
import { globalFlags, outputOption } from "./shared.js";

const PORTS_HELP = `
An exposed port is reachable through the server, without an API key, by whoever has its token:
HTTP and WebSockets at <server>/ports/ID/PORT/..., raw TCP over a WebSocket at <server>/tcp/ID/PORT.
Send the token as the X-Sandtree-Token header, or ?sandtree_token=... (a browser then gets a
cookie for that port). The token is shown only by expose; exposing again replaces it.

Examples:
  sandtree sandbox expose sb-hzs3n4xqkrgpkpys 8080
  curl -H "X-Sandtree-Token: $TOKEN" http://127.0.0.1:7070/ports/sb-hzs3n4xqkrgpkpys/8080/
  sandtree sandbox port-forward sb-hzs3n4xqkrgpkpys 5432 --local 15432`;

const portArg = parseIntArg("PORT");

function port(input: string): number {
  const n = portArg(input);
  if (n > 65535) throw new InvalidArgumentError("PORT must be 1-65535");
  return n;
}

export function registerPortCommands(sandbox: Command, ctx: CliContext): void {
  sandbox
    .command("expose")
    .description("make a sandbox port reachable through the server; prints its URL and token (shown once)")
    .argument("<id>", "sandbox id")
    .argument("<port>", "port in the sandbox (1-65535)", port)
    .addOption(outputOption())
    .addOption(new Option("--json", "same as -o json").hideHelp())
    .addHelpText("after", PORTS_HELP)
    .action(async (id: string, p: number, o: { output: OutputFormat; json?: boolean }, cmd: Command) => {
      const exposed = await (await ctx.client(globalFlags(cmd))).sandboxes.expose(id, p);
      if (o.json || o.output === "json") return printJson(ctx.stdout, exposed);
      const token = exposed.token ?? "";
      ctx.stdout.write(
        renderFields([
          ["url", exposed.url],
          ["tcp url", exposed.tcp_url],
          ["token", token],
          ["browser", `${exposed.url}?sandtree_token=${encodeURIComponent(token)}`],
        ]),
      );
      ctx.stderr.write("the token is shown only now; exposing the port again replaces it\n");
    });

  sandbox
    .command("unexpose")
    .description("stop exposing a sandbox port (its token stops working)")
    .argument("<id>", "sandbox id")
    .argument("<port>", "port in the sandbox", port)
    .addOption(outputOption())
    .action(async (id: string, p: number, o: { output: OutputFormat }, cmd: Command) => {
      await (await ctx.client(globalFlags(cmd))).sandboxes.unexpose(id, p);
      printResult(ctx.stdout, o.output, { sandbox_id: id, port: p, exposed: false }, `${p}\n`);
    });

  sandbox
    .command("list-ports")
    .description("list a sandbox's exposed ports")
    .argument("<id>", "sandbox id")
    .addOption(outputOption())
    .addOption(new Option("--json", "same as -o json").hideHelp())
    .action(async (id: string, o: { output: OutputFormat; json?: boolean }, cmd: Command) => {
      const ports = await (await ctx.client(globalFlags(cmd))).sandboxes.listPorts(id);
      if (o.json || o.output === "json") return printJson(ctx.stdout, { ports });
      ctx.stdout.write(portTable(ports));
    });

  sandbox
    .command("port-forward")
    .description("listen locally and carry each connection to a sandbox port (until Ctrl-C)")
    .argument("<id>", "sandbox id")
    .argument("<port>", "port in the sandbox", port)
    .option("--local <n>", "local port (default: the same as PORT; 0 picks a free one)", parseIntArg("--local", 0))
    .option("--host <addr>", "local address to listen on", "127.0.0.1")
    .option("--token <token>", "use the port's token instead of the API key")
    .action(async (id: string, p: number, o: { local?: number; host: string; token?: string }, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      const fwd = await client.sandboxes.portForward(id, p, {
        localPort: o.local ?? p,
        host: o.host,
        ...(o.token !== undefined ? { token: o.token } : {}),
        onError: (err) => ctx.stderr.write(`${describeError(err).line}\n`),
      });
      // Ctrl-C is caught before anything is printed: whoever reads the address may signal at once,
      // and a signal before the handler exists would kill the process (130) without closing.
      const stopped = new Promise<void>((resolve) => {
        const stop = () => {
          process.off("SIGINT", stop);
          process.off("SIGTERM", stop);
          resolve();
        };
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
      ctx.stdout.write(`${fwd.host}:${fwd.localPort}\n`);
      ctx.stderr.write(`forwarding ${fwd.host}:${fwd.localPort} -> ${id}:${p} (Ctrl-C stops)\n`);
      await stopped;
      await fwd.close();
    });
}

export function portTable(ports: readonly ExposedPort[], now = Date.now()): string {
  return renderTable(
    ["PORT", "URL", "TCP URL", "AGE"],
    ports.map((p) => [String(p.port), p.url, p.tcp_url, formatAge(p.created_at, now)]),
  );
}

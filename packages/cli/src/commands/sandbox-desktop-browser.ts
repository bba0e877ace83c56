import type { DesktopEvent } from "@sandtree/sdk";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { parseIntArg } from "../kv.js";
import { type OutputFormat, printJson } from "../output.js";
import { addOneCommand, globalFlags, outputOption } from "./shared.js";

/** What a browser action's event says on one line (its result's interesting part). */
function line(e: DesktopEvent, what: string): string {
  return `#${e.seq} ${e.action.type} ${e.ok ? `ok ${what}` : `failed: ${e.error}`}\n`;
}

/** `sandtree sandbox desktop open|click-element|page-text`: the desktop's browser (Chromium). */
export function registerBrowserCommands(desktop: Command, ctx: CliContext): void {
  const client = (cmd: Command) => ctx.client(globalFlags(cmd));

  desktop
    .command("open")
    .description("open URL in the desktop's browser (Chromium), starting it when it is not running")
    .argument("<id>")
    .argument("<url>")
    .option("--timeout-ms <ms>", "for the browser's start and the page's load", parseIntArg("--timeout-ms", 1), 60_000)
    .addOption(outputOption())
    .action(async (id: string, url: string, o: { timeoutMs: number; output: OutputFormat }, cmd: Command) => {
      const e = await (await client(cmd)).desktop.openUrl(id, url, o.timeoutMs);
      if (o.output === "json") return printJson(ctx.stdout, e);
      const r = e.result ?? {};
      ctx.stdout.write(line(e, `${String(r.url)} "${String(r.title)}" loaded in ${String(r.load_ms)} ms`));
    });

  desktop
    .command("click-element")
    .description("click the page's element with this accessible name (a button's label, a link's text)")
    .argument("<id>")
    .argument("<name>")
    .option("--role <role>", "its accessibility role: button, link, textbox...")
    .option("--button <b>", "left, middle or right", "left")
    .option("--timeout-ms <ms>", "how long to wait for the element", parseIntArg("--timeout-ms", 1), 10_000)
    .addOption(outputOption())
    .action(
      async (
        id: string,
        name: string,
        o: { role?: string; button: string; timeoutMs: number; output: OutputFormat },
        cmd: Command,
      ) => {
        const e = await (await client(cmd)).desktop.clickElement(id, name, {
          ...(o.role !== undefined ? { role: o.role } : {}),
          button: o.button as "left",
          timeoutMs: o.timeoutMs,
        });
        if (o.output === "json") return printJson(ctx.stdout, e);
        const r = e.result ?? {};
        ctx.stdout.write(line(e, `${String(r.role)} "${String(r.name)}" at ${String(r.x)},${String(r.y)}`));
      },
    );

  addOneCommand(desktop, ctx, {
    name: "page-text",
    description: "print the text of the browser's page",
    argument: ["<id>"],
    call: (client, id) => client.desktop.pageText(id),
    text: (page) => (page.text.endsWith("\n") ? page.text : `${page.text}\n`),
  });
}

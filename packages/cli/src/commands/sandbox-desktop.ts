import { writeFile } from "node:fs/promises";
import type { DesktopEvent } from "@sandtree/sdk";
import { type Command, InvalidArgumentError } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { parseIntArg } from "../kv.js";
import { type OutputFormat, printJson, renderFields, renderTable } from "../output.js";
import { registerBrowserCommands } from "./sandbox-desktop-browser.js";
import { addOneCommand, globalFlags, outputOption } from "./shared.js";

const DESKTOP_HELP = `
A desktop is a sandbox created from sandtree/desktop with a display:
  sandtree sandbox create sandtree/desktop --display 1280x800 --wait
Every action is recorded as an event (seq, times, screenshots' sha256 before and after, focused
window, pointer) in the sandbox's log, which checkpoints and forks carry (docs/desktop.md).

Examples:
  sandtree sandbox desktop key ID ctrl+alt+t
  sandtree sandbox desktop type ID 'ls -l\\n'
  sandtree sandbox desktop click ID 400 300 --button right
  sandtree sandbox desktop screenshot ID shot.png
  sandtree sandbox desktop open ID http://127.0.0.1:8000/
  sandtree sandbox desktop click-element ID 'Sign in' --role button
  sandtree sandbox desktop page-text ID
  sandtree sandbox desktop events ID -o json > session.jsonl
  sandtree sandbox desktop replay NEW_ID --from ID
  sandtree sandbox desktop view ID`;

/** "WxH" for --display. */
export function parseDisplay(input: string): { width: number; height: number } {
  const m = /^(\d{1,5})x(\d{1,5})$/.exec(input);
  if (!m) throw new InvalidArgumentError("--display is WIDTHxHEIGHT, e.g. 1280x800");
  return { width: Number(m[1]), height: Number(m[2]) };
}

const coord = parseIntArg("coordinate", 0);

function eventLine(e: DesktopEvent): string {
  const focused = e.focused_window ? ` [${e.focused_window.title}]` : "";
  return `#${e.seq} ${e.action.type} ${e.ok ? "ok" : `failed: ${e.error}`} screen ${e.screen_after.sha256.slice(0, 12)}${focused}\n`;
}

export function registerDesktopCommands(sandbox: Command, ctx: CliContext): void {
  const desktop = sandbox
    .command("desktop")
    .description("act on a sandbox's desktop and read its event log")
    .addHelpText("after", DESKTOP_HELP);
  const client = (cmd: Command) => ctx.client(globalFlags(cmd));
  const printEvent = (e: DesktopEvent, o: { output: OutputFormat }) =>
    o.output === "json" ? printJson(ctx.stdout, e) : ctx.stdout.write(eventLine(e));

  registerBrowserCommands(desktop, ctx);

  addOneCommand(desktop, ctx, {
    name: "info",
    description: "the display's size and state",
    argument: ["<id>"],
    call: (client, id) => client.desktop.info(id),
    text: (info) =>
      renderFields([
        ["display", `${info.width}x${info.height}`],
        ["running", String(info.running)],
        ["vnc", String(info.vnc)],
      ]),
  });

  desktop
    .command("act")
    .description('perform one action given as JSON, e.g. \'{"type":"scroll","dy":3}\'')
    .argument("<id>")
    .argument("<json>")
    .addOption(outputOption())
    .action(async (id: string, json: string, o: { output: OutputFormat }, cmd: Command) => {
      let action: unknown;
      try {
        action = JSON.parse(json);
      } catch {
        throw new UsageError('the action is JSON, e.g. \'{"type":"click","x":10,"y":20}\'');
      }
      printEvent(await (await client(cmd)).desktop.act(id, action as never), o);
    });

  desktop
    .command("click")
    .description("click (at X Y, else where the pointer is)")
    .argument("<id>")
    .argument("[x]", "x (default: where the pointer is)", coord)
    .argument("[y]", "y", coord)
    .option("--button <b>", "left, middle or right", "left")
    .option("--count <n>", "clicks (2: double click)", parseIntArg("--count"), 1)
    .addOption(outputOption())
    .action(
      async (
        id: string,
        x: number | undefined,
        y: number | undefined,
        o: { button: string; count: number; output: OutputFormat },
        cmd: Command,
      ) => {
        const at = x !== undefined && y !== undefined ? { x, y } : {};
        printEvent(
          await (await client(cmd)).desktop.act(id, { type: "click", ...at, button: o.button as "left", count: o.count }),
          o,
        );
      },
    );

  desktop
    .command("move")
    .description("move the pointer to X Y")
    .argument("<id>")
    .argument("<x>", "x", coord)
    .argument("<y>", "y", coord)
    .addOption(outputOption())
    .action(async (id: string, x: number, y: number, o: { output: OutputFormat }, cmd: Command) => {
      printEvent(await (await client(cmd)).desktop.move(id, x, y), o);
    });

  desktop
    .command("key")
    .description("press key chords, e.g. ctrl+l, Return, ctrl+alt+t")
    .argument("<id>")
    .argument("<keys...>")
    .addOption(outputOption())
    .action(async (id: string, keys: string[], o: { output: OutputFormat }, cmd: Command) => {
      printEvent(await (await client(cmd)).desktop.key(id, keys.join(" ")), o);
    });

  desktop
    .command("type")
    .description("type text (\\n in the argument is Return)")
    .argument("<id>")
    .argument("<text>")
    .addOption(outputOption())
    .action(async (id: string, text: string, o: { output: OutputFormat }, cmd: Command) => {
      printEvent(await (await client(cmd)).desktop.type(id, text.replaceAll("\\n", "\n")), o);
    });

  desktop
    .command("screenshot")
    .description("take a screenshot and write the PNG to FILE")
    .argument("<id>")
    .argument("<file>")
    .addOption(outputOption())
    .action(async (id: string, file: string, o: { output: OutputFormat }, cmd: Command) => {
      const { event, png } = await (await client(cmd)).desktop.screenshot(id);
      await writeFile(file, png);
      if (o.output === "json") return printJson(ctx.stdout, event);
      ctx.stdout.write(`${file} ${event.screen_after.sha256}\n`);
    });

  addOneCommand(desktop, ctx, {
    name: "windows",
    description: "the open windows",
    argument: ["<id>"],
    call: (client, id) => client.desktop.windows(id),
    text: (windows) =>
      renderTable(
        ["ID", "FOCUSED", "GEOMETRY", "CLASS", "TITLE"],
        windows.map((w) => [w.id, w.focused ? "*" : "", `${w.width}x${w.height}+${w.x}+${w.y}`, w.class, w.title]),
      ),
  });

  desktop
    .command("events")
    .description("the event log: a line per event, or with -o json the API's JSONL (one event per line)")
    .argument("<id>")
    .option("--after <seq>", "only events after this seq", parseIntArg("--after", 0), 0)
    .addOption(outputOption())
    .action(async (id: string, o: { after: number; output: OutputFormat }, cmd: Command) => {
      for (const e of await (await client(cmd)).desktop.events(id, o.after)) {
        ctx.stdout.write(o.output === "json" ? `${JSON.stringify(e)}\n` : eventLine(e));
      }
    });

  desktop
    .command("replay")
    .description("replay another sandbox's log into this one and report whether each screen matched")
    .argument("<id>", "the sandbox to act on (a fresh desktop or a fork)")
    .requiredOption("--from <source>", "the sandbox whose log to replay")
    .option(
      "--after <seq>",
      "only events after this seq (a fork replays what followed its fork point)",
      parseIntArg("--after", 0),
      0,
    )
    .addOption(outputOption())
    .action(async (id: string, o: { from: string; after: number; output: OutputFormat }, cmd: Command) => {
      const report = await (await client(cmd)).desktop.replay(id, { source_sandbox_id: o.from, after_seq: o.after });
      if (o.output === "json") return printJson(ctx.stdout, report);
      ctx.stdout.write(
        renderTable(
          ["SEQ", "ACTION", "MATCH", "EXACT", "DIFF"],
          report.steps.map((s) => [
            String(s.seq),
            s.type,
            s.match ? "yes" : "NO",
            s.exact ? "yes" : "no",
            s.diff_ratio === null ? "-" : s.diff_ratio.toFixed(4),
          ]),
        ),
      );
      ctx.stdout.write(`${report.matched}/${report.total} matched\n`);
      if (!report.all_match) process.exitCode = 1;
    });

  desktop
    .command("view")
    .description("print where to watch the display live: the dashboard's viewer and its VNC WebSocket")
    .argument("<id>")
    .option("--interactive", "the WebSocket URL lets the viewer type and click (default: view only)")
    .option("--tcp", "instead, start x11vnc on port 5900 and expose it (needs the sandbox's network)")
    .option("--writable", "with --tcp: let the viewer type and click")
    .addOption(outputOption())
    .action(
      async (id: string, o: { interactive?: boolean; tcp?: boolean; writable?: boolean; output: OutputFormat }, cmd: Command) => {
        const c = await client(cmd);
        if (o.writable && !o.tcp) throw new UsageError("--writable goes with --tcp; the viewer's own switch is --interactive");
        if (!o.tcp) {
          const urls = await c.desktop.viewUrls(id, { interactive: o.interactive === true });
          if (o.output === "json") return printJson(ctx.stdout, urls);
          ctx.stdout.write(
            renderFields([
              ["viewer", urls.viewer_url],
              [
                "websocket",
                `${urls.websocket_url} (raw RFB; ${urls.view_only ? "view only" : "interactive"}; API key as bearer)`,
              ],
            ]),
          );
          return;
        }
        const vnc = await c.desktop.vnc(id, o.writable === true);
        if (o.output === "json") return printJson(ctx.stdout, vnc);
        ctx.stdout.write(
          renderFields([
            ["vnc", `port ${vnc.port} in ${id} (${vnc.view_only ? "view only" : "writable"})`],
            ["tcp url", vnc.tcp_url],
            ["token", vnc.token ?? ""],
            ["connect", `sandtree sandbox port-forward ${id} ${vnc.port} --local 5900, then a VNC viewer at 127.0.0.1:5900`],
          ]),
        );
      },
    );
}

import type { Sandbox } from "@sandtree/protocol";
import type { SandtreeClient } from "@sandtree/sdk";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { describeError } from "../errors.js";
import { parseIntArg } from "../kv.js";
import { type OutputFormat, printResult } from "../output.js";
import { withSpinner } from "../progress.js";
import { globalFlags, outputOption } from "./shared.js";

/** Prints a sandbox just created (JSON, or its id), once it runs when `--wait` was given. */
export async function printCreated(
  ctx: CliContext,
  client: SandtreeClient,
  created: Sandbox,
  o: { wait?: boolean; waitTimeout: number; output?: OutputFormat },
): Promise<void> {
  let sb = created;
  if (o.wait) {
    const [running] = await waitRunning(ctx, client, [sb.id], o.waitTimeout);
    if (running === undefined) return;
    sb = running;
  }
  printResult(ctx.stdout, o.output, sb, `${sb.id}\n`);
}

/**
 * Waits until every sandbox is RUNNING (progress on stderr). The RUNNING ones come back in the
 * order given; each failure is printed on stderr and sets exit code 1.
 */
export async function waitRunning(
  ctx: CliContext,
  client: SandtreeClient,
  ids: string[],
  timeoutSeconds: number,
): Promise<Sandbox[]> {
  const results = await withSpinner(ctx.stderr, `waiting for ${ids.join(", ")}`, (spin) =>
    Promise.allSettled(
      ids.map((id) =>
        client.sandboxes.waitForCreation(id, {
          timeoutMs: timeoutSeconds * 1000,
          onProgress: (s) => spin.update(ids.length > 1 ? `${id} ${s.status}` : s.status),
        }),
      ),
    ),
  );
  const running: Sandbox[] = [];
  for (const r of results) {
    if (r.status === "fulfilled") running.push(r.value);
    else {
      ctx.stderr.write(`${describeError(r.reason).line}\n`);
      ctx.exitCode = 1;
    }
  }
  return running;
}

export function registerWaitCommand(sandbox: Command, ctx: CliContext): void {
  sandbox
    .command("wait")
    .description("wait until sandboxes are RUNNING; prints their ids (exit 1 if one ended or the wait ran out)")
    .argument("<ids...>", "sandbox ids")
    .option("--wait-timeout <seconds>", "give up waiting after this long", parseIntArg("--wait-timeout"), 300)
    .addOption(outputOption())
    .action(async (ids: string[], o: { waitTimeout: number; output: OutputFormat }, cmd: Command) => {
      const client = await ctx.client(globalFlags(cmd));
      const running = await waitRunning(ctx, client, ids, o.waitTimeout);
      printResult(ctx.stdout, o.output, running, running.map((s) => `${s.id}\n`).join(""));
    });
}

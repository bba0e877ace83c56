import { PassThrough } from "node:stream";
import type { SandtreeClient } from "@sandtree/sdk";
import type { CliContext } from "../src/context.js";
import { runCli } from "../src/program.js";

/** A stub method's body: records `call` in `calls` and answers `answer`. */
export function recorded<T>(calls: unknown[], call: unknown, answer: T): T {
  calls.push(call);
  return answer;
}

/** What a CLI run printed so far (read while it runs: a port forward never ends by itself). */
export interface StubOutput {
  text: string;
}

/**
 * Starts the CLI with a stub client standing in for the SDK (these tests need no server): the
 * run's promise, its output as it comes, and the flags each `client()` call was given.
 */
export function startCli(argv: string[], client: Record<string, unknown> = {}) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: StubOutput = { text: "" };
  const err: StubOutput = { text: "" };
  stdout.on("data", (d) => (out.text += d));
  stderr.on("data", (d) => (err.text += d));
  const flags: unknown[] = [];
  const ctx: CliContext = {
    stdout,
    stderr,
    stdin: Object.assign(new PassThrough(), { isTTY: false }),
    env: {},
    client: async (f) => {
      flags.push(f);
      return client as unknown as SandtreeClient;
    },
    exitCode: 0,
  };
  return { done: runCli(argv, ctx), out, err, flags };
}

/** Runs the CLI to its end with a stub client: its exit code, stdout, stderr and client flags. */
export async function cli(argv: string[], client: Record<string, unknown> = {}) {
  const run = startCli(argv, client);
  const code = await run.done;
  return { code, out: run.out.text, err: run.err.text, flags: run.flags };
}

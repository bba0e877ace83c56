import type { Readable, Writable } from "node:stream";
import { SandtreeClient } from "@sandtree/sdk";
import { type Env, type GlobalFlags, resolveCliConfig } from "./config.js";
import { VERSION } from "./version.js";

export type Out = Writable & { isTTY?: boolean };
export type In = Readable & { isTTY?: boolean };

/** What commands touch of the outside world; tests pass their own. */
export interface CliContext {
  stdout: Out;
  stderr: Out;
  stdin: In;
  env: Env;
  /** A client for the global flags (--api-url, --api-key) and the environment. */
  client(flags: GlobalFlags): Promise<SandtreeClient>;
  /** Set by commands whose exit status is not simply 0 (e.g. `sandbox run`). */
  exitCode: number;
}

export function processContext(): CliContext {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    async client(flags) {
      const config = await resolveCliConfig(flags, process.env);
      return new SandtreeClient({ ...config, env: {}, userAgent: `sandtree-cli/${VERSION}` });
    },
    exitCode: 0,
  };
}

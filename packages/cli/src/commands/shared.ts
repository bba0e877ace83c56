import { type Command, InvalidArgumentError, Option } from "commander";
import type { GlobalFlags } from "../config.js";

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

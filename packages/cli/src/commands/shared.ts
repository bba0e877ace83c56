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

export function outputOption(): Option {
  return new Option("-o, --output <format>", "output format").choices(["table", "json"]).default("table");
}

export function choice<T extends string>(name: string, values: readonly T[]): (input: string) => T {
  return (input) => {
    const v = input.toUpperCase() as T;
    if (!values.includes(v)) throw new InvalidArgumentError(`${name} must be one of ${values.join(", ")}`);
    return v;
  };
}

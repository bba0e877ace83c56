// The command line of a bench: one table of options and their defaults, parsed with parseArgs.
import { parseArgs } from "node:util";

/**
 * Parses `--name value` options, one per key of `defaults`: a number default gives a number, a
 * string default a string, a boolean default a flag, `undefined` a string that may be absent.
 */
export function benchArgs(defaults) {
  const options = {};
  for (const [name, d] of Object.entries(defaults)) {
    if (typeof d === "boolean") options[name] = { type: "boolean", default: d };
    else options[name] = d === undefined ? { type: "string" } : { type: "string", default: String(d) };
  }
  const { values } = parseArgs({ options });
  return Object.fromEntries(
    Object.keys(defaults).map((k) => [k, typeof defaults[k] === "number" ? Number(values[k]) : values[k]]),
  );
}

import { InvalidArgumentError } from "commander";

/** Splits `K=V` at the first `=`; the value may be empty and may contain `=`. */
export function parseKeyValue(input: string): [string, string] {
  const at = input.indexOf("=");
  if (at <= 0) throw new InvalidArgumentError(`expected KEY=VALUE, got ${JSON.stringify(input)}`);
  return [input.slice(0, at), input.slice(at + 1)];
}

/** Commander collector for repeatable `--flag K=V`; a later key overrides an earlier one. */
export function collectKeyValue(input: string, previous: Record<string, string> = {}): Record<string, string> {
  const [key, value] = parseKeyValue(input);
  return { ...previous, [key]: value };
}

export function parseIntArg(name: string, min = 1): (input: string) => number {
  return (input) => {
    const n = Number(input);
    if (!/^\d+$/.test(input.trim()) || !Number.isSafeInteger(n) || n < min) {
      throw new InvalidArgumentError(`${name} must be an integer >= ${min}`);
    }
    return n;
  };
}

/** A number > 0, or >= `min` when given (the server's own lower bound, e.g. 0.125 for --memory-gb). */
export function parseNumberArg(name: string, min?: number): (input: string) => number {
  return (input) => {
    const n = Number(input);
    const ok = input.trim() !== "" && Number.isFinite(n) && (min === undefined ? n > 0 : n >= min);
    if (!ok) throw new InvalidArgumentError(`${name} must be a number ${min === undefined ? "> 0" : `>= ${min}`}`);
    return n;
  };
}

import { SandtreeError } from "@sandtree/protocol";

const FLAT = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * Whether `name` names one entry of a directory and nothing else: 1 to `max` letters, digits,
 * `.`, `_` and `-`, starting with a letter or digit, without `..` (so never a path, never hidden).
 * What a host takes for every name it joins with one of its own roots (machines, layers, volumes).
 */
export function isFlatName(name: string, max: number): boolean {
  return name.length <= max && FLAT.test(name) && !name.includes("..");
}

/** `name` when it is flat (isFlatName); else VALIDATION_FAILED on `field`, saying `what` it should be. */
export function checkFlatName(name: string, o: { max: number; field: string; what: string }): string {
  if (!isFlatName(name, o.max))
    throw new SandtreeError(
      "VALIDATION_FAILED",
      `${o.what} is 1 to ${o.max} letters, digits, '.', '_' or '-', starting with a letter or digit, without '..' (got ${JSON.stringify(name.slice(0, o.max + 8))})`,
      { field: o.field },
    );
  return name;
}

import { readFileSync } from "node:fs";

/** This package's version, read from its package.json (scripts/bump-version.mjs sets it for every package). */
export const VERSION: string = (
  JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }
).version;

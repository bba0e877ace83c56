import { fileURLToPath } from "node:url";

/** The repository root: this file is packages/cli/dist/paths.js (or src/paths.ts under tests). */
export function repoRoot(): string {
  return fileURLToPath(new URL("../../../", import.meta.url));
}

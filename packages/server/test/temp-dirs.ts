import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/** Temporary directories a test file makes as it goes, removed together at its end. */
export function tempDirs(): { mkdir(prefix: string): string; removeAll(): void } {
  const made: string[] = [];
  return {
    mkdir(prefix) {
      const d = mkdtempSync(path.join(tmpdir(), prefix));
      made.push(d);
      return d;
    },
    removeAll() {
      for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
    },
  };
}

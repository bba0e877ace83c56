// Waiting for a server's warm templates (benches that measure warm starts wait for them first).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/**
 * Waits (up to 5 minutes) until both templates exist under `dataDir`: the shape one (waits for
 * its root disk) and the image's own; of `memoryMb` MiB only, when given.
 */
export async function templatesBuilt(dataDir, memoryMb) {
  const root = path.join(dataDir, "templates");
  for (let i = 0; i < 1200; i++) {
    const kinds = new Set();
    for (const k of existsSync(root) ? readdirSync(root) : []) {
      const meta = path.join(root, k, "template.json");
      if (!existsSync(meta)) continue;
      const t = JSON.parse(readFileSync(meta, "utf8"));
      if (memoryMb === undefined || t.inputs.memoryMb === memoryMb) kinds.add(t.rootWait ? "shape" : "image");
    }
    if (kinds.size >= 2) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`the ${memoryMb === undefined ? "" : `${memoryMb} MiB `}templates were never built`);
}

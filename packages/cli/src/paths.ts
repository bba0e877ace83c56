import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The clone of the sandtree repository this CLI runs from (it is packages/cli/dist/paths.js
 * there, or src/paths.ts under tests), or null for a CLI installed from its npm package.
 */
export function repoCheckout(): string | null {
  const root = fileURLToPath(new URL("../../../", import.meta.url));
  return existsSync(join(root, "scripts", "setup.sh")) && existsSync(join(root, "packages", "guest")) ? root : null;
}

/** What a machine needs to run the server; said by `serve` and `setup` when this CLI has none of it. */
export const SERVER_NEEDS =
  "the server (the package @sandtree/server) and the guest kernel, agent and images it boots are built from a clone " +
  "of the sandtree repository on the Linux host of the VMs: `bash scripts/setup.sh` there, then `sandtree serve`. " +
  "The other commands only need a running server: set SANDTREE_API_URL and SANDTREE_API_KEY";

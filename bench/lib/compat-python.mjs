// The python of the compatibility clients' environment (prime-sandboxes, verifiers, e2b at
// clients/compat/requirements.txt's pins), built by scripts/setup-compat-venv.sh; the same path
// packages/server/test/compat-python.ts gives the tests.
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

export function compatPython() {
  const hash = createHash("sha256")
    .update(readFileSync(path.join(repo, "clients/compat/requirements.txt")))
    .digest("hex")
    .slice(0, 16);
  const cache =
    process.env.SANDTREE_CACHE_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), ".cache"), "sandtree");
  const python = path.join(cache, "compat-venv", hash, "bin/python");
  if (!existsSync(path.join(cache, "compat-venv", hash, ".complete")))
    throw new Error(`${python} is missing: run bash scripts/setup.sh`);
  return python;
}

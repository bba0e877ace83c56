import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/**
 * The python of the compatibility clients' virtual environment (prime-sandboxes, verifiers, e2b at
 * clients/compat/requirements.txt's pins), which scripts/setup-compat-venv.sh builds. Throws when
 * setup has not built it, so a test that needs the real clients fails rather than skips.
 */
export function compatPython(): string {
  const req = readFileSync(path.join(REPO, "clients/compat/requirements.txt"));
  const hash = createHash("sha256").update(req).digest("hex").slice(0, 16);
  const cache =
    process.env.SANDTREE_CACHE_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), ".cache"), "sandtree");
  const python = path.join(cache, "compat-venv", hash, "bin/python");
  if (!existsSync(python) || !existsSync(path.join(cache, "compat-venv", hash, ".complete"))) {
    throw new Error(`the compatibility clients' Python environment is missing (${python}): run bash scripts/setup.sh`);
  }
  return python;
}

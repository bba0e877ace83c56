import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { compatPython } from "./compat-python.js";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

// sandtree's Python client against the real prime_sandboxes (0.5.1, in the compatibility venv):
// clients/python/tests/prime_compat.py compares every shared method's signature, the returned
// models' fields and the exception classes, and prints each mismatch. A missing venv throws.
describe("the Python client, signature for signature with prime_sandboxes", () => {
  it("has no mismatch", () => {
    const r = spawnSync(compatPython(), [path.join(REPO, "clients/python/tests/prime_compat.py")], {
      encoding: "utf8",
      timeout: 60_000,
    });
    const out = `${r.stdout}${r.stderr}`;
    expect(out).toContain("prime_sandboxes 0.5.1");
    expect(out.split("\n").filter((l) => l.startsWith("MISMATCH"))).toEqual([]);
    expect(r.status, out).toBe(0);
  });
});

import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { compatPython } from "./compat-python.js";

describe("the compatibility clients' Python environment", () => {
  it("holds the pinned prime-sandboxes, verifiers and e2b clients", () => {
    const out = execFileSync(
      compatPython(),
      [
        "-c",
        "import importlib.metadata as m, prime_sandboxes, verifiers, e2b; print(*(m.version(p) for p in ('prime-sandboxes', 'verifiers', 'e2b')))",
      ],
      { encoding: "utf8" },
    );
    expect(out.trim()).toBe("0.5.1 0.4.0 2.51.0");
  });
});

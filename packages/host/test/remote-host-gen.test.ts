// The remote host's generated code (src/gen, from proto/ by `npm run gen:proto`, which `npm run build`
// runs first; not written) matches its .proto.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";

const HOST_PKG = path.resolve(import.meta.dirname, "..");
const BIN = path.resolve(HOST_PKG, "../../node_modules/.bin");

function listFiles(dir: string, rel = ""): string[] {
  let names: string[];
  try {
    names = readdirSync(path.join(dir, rel));
  } catch {
    return [];
  }
  return names
    .flatMap((n) => {
      const r = path.join(rel, n);
      return statSync(path.join(dir, r)).isDirectory() ? listFiles(dir, r) : [r];
    })
    .sort();
}

describe("remote host protocol", () => {
  it("has generated code up to date with proto/sandtree/host/v1/host.proto", () => {
    const out = mkdtempSync(path.join(tmpdir(), "st-hostgen-"));
    try {
      execFileSync(path.join(BIN, "buf"), ["generate", "--template", "buf.gen.yaml", "-o", out], {
        cwd: HOST_PKG,
        env: { ...process.env, PATH: `${BIN}:${process.env.PATH}` },
      });
      const fresh = path.join(out, "src/gen");
      const written = path.join(HOST_PKG, "src/gen");
      const files = listFiles(fresh);
      expect(files.length).toBeGreaterThan(0);
      expect(listFiles(written)).toEqual(files);
      for (const f of files) {
        expect(readFileSync(path.join(written, f), "utf8"), `src/gen/${f} is stale: npm run gen:proto`).toBe(
          readFileSync(path.join(fresh, f), "utf8"),
        );
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

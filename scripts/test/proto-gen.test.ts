// The code generated from the .proto files (by `npm run gen:proto`, which `npm run build` runs
// first; not committed) matches them: the server's Connect services (src/gen), the tests' own
// (test/gen) and the remote host's service (packages/host src/gen). Generates each afresh with
// the pinned buf and protoc-gen-es into a scratch folder and compares file by file.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");
const BIN = path.join(ROOT, "node_modules/.bin");

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

// [package, template, its .proto folder, the folder it writes]
const PAIRS: [string, string, string, string][] = [
  ["packages/server", "buf.gen.yaml", "proto", "src/gen"],
  ["packages/server", "buf.gen.test.yaml", "test/proto", "test/gen"],
  ["packages/host", "buf.gen.yaml", "proto", "src/gen"],
];

describe("generated protobuf code", () => {
  for (const [pkg, template, protoDir, dir] of PAIRS) {
    it(`${pkg}/${dir} is up to date with ${pkg}/${protoDir}`, () => {
      const cwd = path.join(ROOT, pkg);
      const protos = listFiles(path.join(cwd, protoDir)).filter((f) => f.endsWith(".proto"));
      expect(protos.length).toBeGreaterThan(0);
      const out = mkdtempSync(path.join(tmpdir(), "st-gen-"));
      try {
        execFileSync(path.join(BIN, "buf"), ["generate", "--template", template, "-o", out], {
          cwd,
          env: { ...process.env, PATH: `${BIN}:${process.env.PATH}` },
        });
        const fresh = path.join(out, dir);
        const written = path.join(cwd, dir);
        const files = listFiles(fresh);
        expect(files.length).toBeGreaterThan(0);
        expect(listFiles(written)).toEqual(files);
        for (const f of files) {
          expect(readFileSync(path.join(written, f), "utf8"), `${pkg}/${dir}/${f} is stale: npm run gen:proto`).toBe(
            readFileSync(path.join(fresh, f), "utf8"),
          );
        }
      } finally {
        rmSync(out, { recursive: true, force: true });
      }
    });
  }
});

// One version for the whole project (#23): the repository's package.json files and lock agree,
// and scripts/bump-version.mjs moves all of them (and CHANGELOG.md's Unreleased section) at once.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const script = path.join(repo, "scripts", "bump-version.mjs");
const scratch = mkdtempSync(path.join(tmpdir(), "bump-version-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

type Pkg = { version?: string; workspaces?: string[] } & Partial<
  Record<"dependencies" | "devDependencies" | "peerDependencies", Record<string, string>>
>;
const readJson = <T>(file: string) => JSON.parse(readFileSync(file, "utf8")) as T;
const bump = (...args: string[]) => spawnSync(process.execPath, [script, ...args], { encoding: "utf8" });

/** Every `@sandtree/*` pin of a package.json or lock entry. */
const pins = (p: Pkg) =>
  (["dependencies", "devDependencies", "peerDependencies"] as const).flatMap((f) =>
    Object.entries(p[f] ?? {})
      .filter(([name]) => name.startsWith("@sandtree/"))
      .map(([, v]) => v),
  );

describe("scripts/bump-version.mjs", () => {
  it("--check: every package.json, their pins of each other and the lock agree in this repository", () => {
    const r = bump("--check");
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/agree/);
  });

  it("sets one version everywhere and opens the release in the changelog", () => {
    const root = readJson<Pkg>(path.join(repo, "package.json"));
    const python = ["clients/python/pyproject.toml", "clients/python/src/sandtree/_version.py"];
    const files = ["package.json", "package-lock.json", ...python, ...(root.workspaces ?? []).map((w) => `${w}/package.json`)];
    for (const f of files) {
      mkdirSync(path.dirname(path.join(scratch, f)), { recursive: true });
      copyFileSync(path.join(repo, f), path.join(scratch, f));
    }
    writeFileSync(path.join(scratch, "CHANGELOG.md"), "# Changelog\n\n## [Unreleased]\n\n### Added\n\n- a thing\n");

    const r = bump("7.8.9", "--root", scratch);
    expect(r.status, r.stderr).toBe(0);
    expect(bump("--check", "--root", scratch).status).toBe(0);
    for (const w of root.workspaces ?? []) {
      const pkg = readJson<Pkg>(path.join(scratch, w, "package.json"));
      expect(pkg.version, w).toBe("7.8.9");
      expect(new Set(pins(pkg)), w).toEqual(new Set(pins(pkg).length ? ["7.8.9"] : []));
    }
    const lock = readJson<{ version: string; packages: Record<string, Pkg> }>(path.join(scratch, "package-lock.json"));
    expect(lock.version).toBe("7.8.9");
    for (const w of root.workspaces ?? []) {
      expect(lock.packages[w]?.version, w).toBe("7.8.9");
      expect(
        pins(lock.packages[w] ?? {}).every((v) => v === "7.8.9"),
        w,
      ).toBe(true);
    }
    // The Python SDK's pyproject.toml and __version__ move with them (only those lines change).
    const pyproject = readFileSync(path.join(scratch, python[0] ?? ""), "utf8");
    expect(pyproject).toMatch(/^version = "7\.8\.9"$/m);
    expect(pyproject.replace('"7.8.9"', `"${root.version}"`)).toBe(readFileSync(path.join(repo, python[0] ?? ""), "utf8"));
    expect(readFileSync(path.join(scratch, python[1] ?? ""), "utf8")).toMatch(/^__version__ = "7\.8\.9"$/m);
    expect(readFileSync(path.join(scratch, "CHANGELOG.md"), "utf8")).toMatch(
      /## \[Unreleased\]\n\n## \[7\.8\.9\] - \d{4}-\d{2}-\d{2}\n\n### Added\n\n- a thing\n/,
    );

    // A hand-edited pin that disagrees is reported by --check.
    const cli = path.join(scratch, "packages", "cli", "package.json");
    expect(existsSync(cli)).toBe(true);
    const pkg = readJson<Pkg>(cli);
    writeFileSync(cli, JSON.stringify({ ...pkg, dependencies: { ...pkg.dependencies, "@sandtree/sdk": "7.8.8" } }));
    const check = bump("--check", "--root", scratch);
    expect(check.status).toBe(1);
    expect(check.stderr).toContain("packages/cli/package.json dependencies.@sandtree/sdk: 7.8.8 (want 7.8.9)");

    // So is a Python version that disagrees.
    const versionPy = path.join(scratch, python[1] ?? "");
    writeFileSync(versionPy, readFileSync(versionPy, "utf8").replace('"7.8.9"', '"7.8.7"'));
    expect(bump("--check", "--root", scratch).stderr).toContain(
      "clients/python/src/sandtree/_version.py version: 7.8.7 (want 7.8.9)",
    );
  });

  it("refuses what is not a version", () => {
    const r = bump("1.2", "--root", scratch);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/not a version/);
  });
});

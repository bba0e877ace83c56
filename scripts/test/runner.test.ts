// The test runner's own test: a file that fails outside its tests (a throwing beforeAll, an import
// error, an unhandled rejection, a failing afterAll, a hook timeout) must make the run fail with a
// non-zero failed count, and under CI=true a skipped test fails unless .ci/allowed-skips names it.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const fixture = path.join(repo, "scripts", "test", "fixtures", "runner");
const scratch = mkdtempSync(path.join(tmpdir(), "runner-test-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function runFixture(filter: string, opts: { ci?: boolean; extra?: string[]; python?: string } = {}) {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CI;
  delete env.VITEST;
  delete env.VITEST_WORKER_ID;
  delete env.VITEST_POOL_ID;
  delete env.NODE_ENV;
  if (opts.ci) env.CI = "true";
  const r = spawnSync(
    process.execPath,
    [
      path.join(repo, "scripts", "run-vitest.mjs"),
      ...(opts.extra ?? []),
      ...(opts.python ? ["--python", path.join(repo, "scripts", "test", "fixtures", "pytest", opts.python)] : []),
      "--root",
      fixture,
      filter,
    ],
    { cwd: repo, env, encoding: "utf8", timeout: 60_000 },
  );
  const out = `${r.stdout}${r.stderr}`;
  const m = /^(\d+) passed, (\d+) failed, (\d+) skipped$/m.exec(r.stdout);
  if (!m) throw new Error(`no summary line in:\n${out}`);
  const last = r.stdout.trim().split("\n").at(-1);
  return { status: r.status, passed: Number(m[1]), failed: Number(m[2]), skipped: Number(m[3]), last, out };
}

describe("scripts/run-vitest.mjs", () => {
  it("passes a run where every test passed, the summary line last", () => {
    const r = runFixture("passing");
    expect(r).toMatchObject({ status: 0, passed: 2, failed: 0, skipped: 0, last: "2 passed, 0 failed, 0 skipped" });
  });

  it("fails every test of a file whose beforeAll throws", () => {
    const r = runFixture("before-all-throws");
    expect(r.status).not.toBe(0);
    expect(r).toMatchObject({ passed: 0, failed: 2, skipped: 0 });
    expect(r.out).toContain("the VM did not boot");
  });

  it("fails a file that cannot be imported", () => {
    const r = runFixture("import-error");
    expect(r.status).not.toBe(0);
    expect(r.failed).toBe(1);
    expect(r.out).toContain("no-such-module.js");
  });

  it("fails a run with an unhandled rejection although every test passed", () => {
    const r = runFixture("unhandled-rejection");
    expect(r.status).not.toBe(0);
    expect(r).toMatchObject({ passed: 1, failed: 1 });
  });

  it("fails a file whose afterAll throws", () => {
    const r = runFixture("after-all-throws");
    expect(r.status).not.toBe(0);
    expect(r).toMatchObject({ passed: 1, failed: 1 });
    expect(r.out).toContain("cleanup failed");
  });

  it("fails a file whose hook times out", () => {
    const r = runFixture("hook-timeout");
    expect(r.status).not.toBe(0);
    expect(r.failed).toBe(1);
  });

  it("counts lint or type steps that failed before the tests", () => {
    const r = runFixture("passing", { extra: ["--failed-steps", "2"] });
    expect(r.status).not.toBe(0);
    expect(r).toMatchObject({ passed: 2, failed: 2 });
  });

  it("shows skipped tests; under CI=true they fail unless allowed with a reason", () => {
    const local = runFixture("skipped");
    expect(local).toMatchObject({ status: 0, passed: 1, failed: 0, skipped: 1 });
    expect(local.out).toContain("skipped: scripts/test/fixtures/runner/skipped.case.js :: is skipped");
    const ci = runFixture("skipped", { ci: true, extra: ["--allowed-skips", path.join(scratch, "none")] });
    expect(ci.status).not.toBe(0);
    expect(ci).toMatchObject({ passed: 1, failed: 1, skipped: 1 });
    const list = path.join(scratch, "allowed-skips");
    writeFileSync(list, "# file :: test :: why\nscripts/test/fixtures/runner/skipped.case.js :: is skipped :: a fixture\n");
    const allowed = runFixture("skipped", { ci: true, extra: ["--allowed-skips", list] });
    expect(allowed).toMatchObject({ status: 0, passed: 1, failed: 0, skipped: 1 });
  });

  it("adds the pytest suite's counts to the same line: a failed test or a module that does not import fails", () => {
    const ok = runFixture("passing", { python: "passing" });
    expect(ok).toMatchObject({ status: 0, passed: 4, failed: 0, skipped: 0 });
    const bad = runFixture("passing", { python: "failing" });
    expect(bad.status).not.toBe(0);
    expect(bad).toMatchObject({ passed: 3, failed: 1 });
    expect(bad.out).toContain("test_fails");
    const broken = runFixture("passing", { python: "broken" });
    expect(broken.status).not.toBe(0);
    expect(broken.failed).toBeGreaterThanOrEqual(1);
    const skip = runFixture("passing", { python: "skipping", ci: true, extra: ["--allowed-skips", path.join(scratch, "none")] });
    expect(skip.status).not.toBe(0);
    expect(skip).toMatchObject({ passed: 3, failed: 1, skipped: 1 });
  });
});

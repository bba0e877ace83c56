#!/usr/bin/env node
// Runs vitest and prints one honest summary line, `N passed, N failed, N skipped`, last.
// Failed counts every failed test, every file that failed without a failed test (an import
// error, a throwing beforeAll/afterAll, a hook timeout), every unhandled error vitest saw, and
// every earlier step (lint, types) the caller says failed. Under CI=true a skipped test is a
// failure unless `.ci/allowed-skips` names it (one `file :: full test name :: why` per line).
// Exits non-zero whenever failed > 0 or vitest itself did.
//
// node scripts/run-vitest.mjs [--failed-steps N] [--allowed-skips FILE] [vitest args...]
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
let failedSteps = 0;
let allowedSkipsFile = path.join(repo, ".ci", "allowed-skips");
const vitestArgs = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === "--failed-steps") failedSteps = Number(args[++i]);
  else if (a === "--allowed-skips") allowedSkipsFile = path.resolve(String(args[++i]));
  else vitestArgs.push(a);
}
if (!Number.isInteger(failedSteps) || failedSteps < 0) {
  console.error("--failed-steps takes a count");
  process.exit(2);
}

const out = mkdtempSync(path.join(tmpdir(), "sandtree-vitest-"));
const jsonFile = path.join(out, "vitest.json");
const vitest = path.join(repo, "node_modules", ".bin", "vitest");
const child = spawn(vitest, ["run", "--reporter=default", "--reporter=json", `--outputFile=${jsonFile}`, ...vitestArgs], {
  stdio: "inherit",
});
const status = await new Promise((resolve) => {
  child.on("error", (err) => {
    console.error(`could not start vitest: ${err.message}`);
    resolve(1);
  });
  child.on("exit", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
});
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));

const problems = [];
let report = null;
try {
  report = JSON.parse(readFileSync(jsonFile, "utf8"));
} catch (err) {
  problems.push(`vitest wrote no report (${err.code ?? err.message})`);
}
rmSync(out, { recursive: true, force: true });

let passed = 0;
let failed = 0;
const skips = [];
for (const file of report?.testResults ?? []) {
  const rel = path.relative(repo, file.name);
  const fileFailed = file.status === "failed";
  let failedHere = 0;
  for (const t of file.assertionResults ?? []) {
    const name = t.fullName ?? t.title;
    if (t.status === "passed") passed++;
    else if (t.status === "failed") failedHere++;
    // In a file that failed (a throwing beforeAll, a hook timeout) a test that did not run failed.
    else if (fileFailed) failedHere++;
    else skips.push({ file: rel, name });
  }
  failed += failedHere;
  // Import error, or a hook that failed after every test passed (afterAll): the file counts once.
  if (fileFailed && failedHere === 0) {
    failed++;
    problems.push(`${rel}: ${String(file.message ?? "").split("\n")[0] || "the file failed outside its tests"}`);
  } else if (fileFailed) {
    problems.push(`${rel}: ${failedHere} test(s) failed or did not run`);
  }
}
const skipped = skips.length;

if (process.env.CI === "true" && skips.length > 0) {
  const allowed = new Set(
    existsSync(allowedSkipsFile)
      ? readFileSync(allowedSkipsFile, "utf8")
          .split("\n")
          .map((l) => l.trim())
          .filter((l) => l && !l.startsWith("#"))
          .map((l) => l.split(" :: ").slice(0, 2).join(" :: "))
      : [],
  );
  for (const s of skips) {
    if (allowed.has(`${s.file} :: ${s.name}`)) continue;
    failed++;
    problems.push(`skipped under CI: ${s.file} :: ${s.name}`);
  }
}
// Unhandled errors, a crashed worker, a config error: vitest failed although no test or file did.
if (status !== 0 && failed === 0) {
  failed++;
  problems.push(`vitest exited with status ${status} (an unhandled error or a run that did not finish)`);
}
if (report === null && failed === 0) failed++;
failed += failedSteps;
if (failedSteps > 0) problems.push(`${failedSteps} step(s) before the tests failed (lint or types)`);

for (const p of problems) console.log(`FAILED: ${p}`);
for (const s of process.env.CI === "true" ? [] : skips) console.log(`skipped: ${s.file} :: ${s.name}`);
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || status !== 0 ? 1 : 0);

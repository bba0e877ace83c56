#!/usr/bin/env node
// Runs vitest and prints one honest summary line, `N passed, N failed, N skipped`, last.
// Failed counts every failed test, every file that failed without a failed test (an import
// error, a throwing beforeAll/afterAll, a hook timeout), every unhandled error vitest saw, and
// every earlier step (lint, types) the caller says failed. Under CI=true a skipped test is a
// failure unless `.ci/allowed-skips` names it (one `file :: full test name :: why` per line).
// Exits non-zero whenever failed > 0 or vitest itself did.
//
// With --python DIR, the pytest suite in DIR runs after vitest (Debian's /usr/bin/python3, whose
// site-packages hold python3-pytest and python3-httpx) and its counts join the same line.
//
// node scripts/run-vitest.mjs [--failed-steps N] [--allowed-skips FILE] [--python DIR] [vitest args...]
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

// Color codes, taken out of the failure lines the summary repeats.
const ANSI_COLOR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g");
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
let failedSteps = 0;
let allowedSkipsFile = path.join(repo, ".ci", "allowed-skips");
let pythonTests = null;
const vitestArgs = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === "--failed-steps") failedSteps = Number(args[++i]);
  else if (a === "--allowed-skips") allowedSkipsFile = path.resolve(String(args[++i]));
  else if (a === "--python") pythonTests = path.resolve(String(args[++i]));
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
  // (A file whose beforeAll failed has no time of its own in the report.)
  const ms = file.endTime && file.startTime ? file.endTime - file.startTime : 0;
  const took = ms >= 1000 ? ` (${Math.round(ms / 1000)} s)` : "";
  if (fileFailed && failedHere === 0) {
    failed++;
    problems.push(`${rel}${took}: ${String(file.message ?? "").split("\n")[0] || "the file failed outside its tests"}`);
  } else if (fileFailed) {
    problems.push(`${rel}${took}: ${failedHere} test(s) failed or did not run${why(file)}`);
  }
}
// Unhandled errors, a crashed worker, a config error: vitest failed although no test or file did.
if (status !== 0 && failed === 0) {
  failed++;
  problems.push(`vitest exited with status ${status} (an unhandled error or a run that did not finish)`);
}
if (report === null && failed === 0) failed++;

let pytestStatus = 0;
if (pythonTests) {
  const py = await runPytest(pythonTests);
  pytestStatus = py.status;
  passed += py.passed;
  failed += py.failed;
  skips.push(...py.skips);
  problems.push(...py.problems);
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
failed += failedSteps;
if (failedSteps > 0) problems.push(`${failedSteps} step(s) before the tests failed (lint or types)`);

for (const p of problems) console.log(`FAILED: ${p}`);
for (const s of process.env.CI === "true" ? [] : skips) console.log(`skipped: ${s.file} :: ${s.name}`);
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || status !== 0 || pytestStatus !== 0 ? 1 : 0);

/**
 * The first lines of a failed file's own error (a throwing hook) and of its first failed test:
 * CI shows only the tail of the output, so the summary carries the reason.
 */
function why(file) {
  const first = (file.assertionResults ?? []).find((t) => t.status === "failed");
  const texts = [file.message, first && `${first.title}: ${first.failureMessages?.[0] ?? ""}`].filter(Boolean);
  const lines = texts.flatMap((t) =>
    String(t)
      .replace(ANSI_COLOR, "")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith("at "))
      .slice(0, 3),
  );
  return lines.map((l) => `\n    ${l.length > 240 ? `${l.slice(0, 240)}...` : l}`).join("");
}

/** Runs pytest with a JUnit report; a run that fails without a failed test counts once. */
async function runPytest(dir) {
  const xmlDir = mkdtempSync(path.join(tmpdir(), "sandtree-pytest-"));
  const xml = path.join(xmlDir, "junit.xml");
  console.log(`== python tests (pytest ${path.relative(repo, dir)})`);
  const py = spawn("/usr/bin/python3", ["-m", "pytest", dir, "-q", "-p", "no:cacheprovider", `--junitxml=${xml}`], {
    stdio: "inherit",
    cwd: repo,
  });
  const code = await new Promise((resolve) => {
    py.on("error", (err) => {
      console.error(`could not start pytest: ${err.message}`);
      resolve(1);
    });
    py.on("exit", (c, signal) => resolve(c ?? (signal ? 128 : 1)));
  });
  const r = { status: code, passed: 0, failed: 0, skips: [], problems: [] };
  let text = "";
  try {
    text = readFileSync(xml, "utf8");
  } catch {}
  rmSync(xmlDir, { recursive: true, force: true });
  const attr = (tag, name) => Number(new RegExp(`\\b${name}="(\\d+)"`).exec(tag)?.[1] ?? 0);
  for (const m of text.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const head = m[1] ?? "";
    const body = m[3] ?? "";
    const cls = /classname="([^"]*)"/.exec(head)?.[1] ?? "";
    const name = `${cls.replaceAll(".", "/")}.py :: ${/\bname="([^"]*)"/.exec(head)?.[1] ?? "?"}`;
    if (/<(failure|error)\b/.test(body)) {
      r.failed++;
      r.problems.push(`pytest: ${name}`);
    } else if (/<skipped\b/.test(body)) r.skips.push({ file: "pytest", name });
    else r.passed++;
  }
  // Collection errors are counted by the suite element, not by a testcase.
  const suite = /<testsuite\b[^>]*>/.exec(text)?.[0] ?? "";
  const suiteErrors = attr(suite, "errors") + attr(suite, "failures");
  if (suiteErrors > r.failed) r.failed = suiteErrors;
  if (code !== 0 && r.failed === 0) {
    r.failed = 1;
    r.problems.push(`pytest exited with status ${code}${text ? "" : " and wrote no report"}`);
  }
  return r;
}

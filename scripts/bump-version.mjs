#!/usr/bin/env node
// One version for the whole project. `node scripts/bump-version.mjs 0.2.0` sets it in every
// package.json, in their pins of each other (@sandtree/* in dependencies, devDependencies and
// peerDependencies), in package-lock.json's workspace entries, and turns CHANGELOG.md's
// Unreleased section into the release's; also the Python SDK's pyproject.toml and `__version__`
// (clients/python). `--check` only reports where the versions disagree.
// `--root DIR` works on another tree (the tests use a copy).
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const DEP_FIELDS = ["dependencies", "devDependencies", "peerDependencies"];

function usage(message) {
  process.stderr.write(`${message}\nusage: node scripts/bump-version.mjs X.Y.Z | --check [--root DIR]\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
let root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
let target;
let check = false;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === "--root") root = path.resolve(args[++i] ?? usage("--root needs a directory"));
  else if (a === "--check") check = true;
  else if (/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(a)) target = a;
  else usage(`not a version X.Y.Z[-pre]: ${a}`);
}
if (check === (target !== undefined)) usage("give a version or --check");

const readJson = (file) => JSON.parse(readFileSync(file, "utf8"));
const writeJson = (file, value) => writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);

const rootPkgFile = path.join(root, "package.json");
const rootPkg = readJson(rootPkgFile);
const version = target ?? rootPkg.version;
const problems = [];
/** Sets (or, under --check, compares) `obj[key]`; `where` names it in the report. */
function pin(obj, key, where) {
  if (obj?.[key] === undefined || obj[key] === version) return;
  if (check) problems.push(`${where}: ${obj[key]} (want ${version})`);
  else obj[key] = version;
}
function pinDeps(pkg, where) {
  for (const field of DEP_FIELDS) {
    for (const name of Object.keys(pkg[field] ?? {})) {
      if (name.startsWith("@sandtree/")) pin(pkg[field], name, `${where} ${field}.${name}`);
    }
  }
}

pin(rootPkg, "version", "package.json version");
if (!check) writeJson(rootPkgFile, rootPkg);
const workspaces = (rootPkg.workspaces ?? []).filter((w) => existsSync(path.join(root, w, "package.json")));
for (const w of workspaces) {
  const file = path.join(root, w, "package.json");
  const pkg = readJson(file);
  pin(pkg, "version", `${w}/package.json version`);
  pinDeps(pkg, `${w}/package.json`);
  if (!check) writeJson(file, pkg);
}

const lockFile = path.join(root, "package-lock.json");
if (existsSync(lockFile)) {
  const lock = readJson(lockFile);
  pin(lock, "version", "package-lock.json version");
  pin(lock.packages?.[""], "version", 'package-lock.json packages[""].version');
  for (const w of workspaces) {
    const entry = lock.packages?.[w];
    if (!entry) continue;
    pin(entry, "version", `package-lock.json packages["${w}"].version`);
    pinDeps(entry, `package-lock.json packages["${w}"]`);
  }
  if (!check) writeJson(lockFile, lock);
}

// The Python SDK: `version = "..."` in pyproject.toml and `__version__ = "..."` in _version.py.
const PYTHON_FILES = [
  ["clients/python/pyproject.toml", /^version = "([^"]*)"$/m, (v) => `version = "${v}"`],
  ["clients/python/src/sandtree/_version.py", /^__version__ = "([^"]*)"$/m, (v) => `__version__ = "${v}"`],
];
const pythonFiles = [];
for (const [rel, pattern, line] of PYTHON_FILES) {
  const file = path.join(root, rel);
  if (!existsSync(file)) continue;
  const text = readFileSync(file, "utf8");
  const found = pattern.exec(text);
  if (!found) {
    problems.push(`${rel}: no line matching ${pattern}`);
    continue;
  }
  pythonFiles.push(rel);
  if (found[1] === version) continue;
  if (check) problems.push(`${rel} version: ${found[1]} (want ${version})`);
  else writeFileSync(file, text.replace(pattern, line(version)));
}

const changelog = path.join(root, "CHANGELOG.md");
if (!check && existsSync(changelog)) {
  const text = readFileSync(changelog, "utf8");
  const date = new Date().toISOString().slice(0, 10);
  if (text.includes(`## [${version}]`)) process.stderr.write(`CHANGELOG.md already has ${version}; left as is\n`);
  else writeFileSync(changelog, text.replace(/^## \[Unreleased\]\n/m, `## [Unreleased]\n\n## [${version}] - ${date}\n`));
}

if (check) {
  if (problems.length > 0) {
    process.stderr.write(`versions disagree with package.json's ${version}:\n${problems.map((p) => `  ${p}\n`).join("")}`);
    process.exit(1);
  }
  const py = pythonFiles.length > 0 ? ", package-lock.json and the Python SDK" : " and package-lock.json";
  process.stdout.write(`${version}: package.json, ${workspaces.length} packages${py} agree\n`);
} else {
  if (problems.length > 0) {
    process.stderr.write(`not set:\n${problems.map((p) => `  ${p}\n`).join("")}`);
    process.exitCode = 1;
  }
  const names = workspaces.map((w) => path.basename(w)).join(", ");
  const py = pythonFiles.map((f) => `, ${f}`).join("");
  process.stdout.write(
    `${version}: package.json, ${names}, package-lock.json${py}${existsSync(changelog) ? ", CHANGELOG.md" : ""}\n`,
  );
}

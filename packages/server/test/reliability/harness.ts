// Shared pieces of the reliability suite: a server over a chosen data dir, figures written for
// scripts/reliability-report.mjs, and small measuring helpers.

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { qemuPidsFor, startTestServer, type TestServer } from "../helpers.js";

export { qemuPidsFor, settleCheckpoint } from "../helpers.js";

/** A real server on a random loopback port; `dataDir` defaults to a fresh temporary directory. */
export function startServerAt(
  opts: { dataDir?: string; keepDataDir?: boolean; logStream?: { write(line: string): unknown } } = {},
): Promise<TestServer> {
  return startTestServer({ ...opts, dataDir: opts.dataDir ?? mkdtempSync(path.join(tmpdir(), "sandtree-rel-")) });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `check` until it returns true or the time is up; returns the last verdict. */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs: number, stepMs = 200): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await sleep(stepMs);
  }
}

/** The directory of QMP/agent sockets the server keeps per data dir (same rule as server.ts). */
export function runRootOf(dataDir: string): string {
  const h = createHash("sha256").update(path.resolve(dataDir)).digest("hex").slice(0, 10);
  return path.join(tmpdir(), `sandtree-${h}`);
}

/** Bytes of the regular files under `p` (symlinks count as nothing: base links point into the cache). */
export function duBytes(p: string, skip: (name: string) => boolean = () => false): number {
  if (!existsSync(p)) return 0;
  const st = lstatSync(p);
  if (st.isSymbolicLink()) return 0;
  if (!st.isDirectory()) return st.blocks * 512;
  let total = 0;
  for (const name of readdirSync(p)) if (!skip(name)) total += duBytes(path.join(p, name), skip);
  return total;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? Number.NaN;
}

/** Checkpoint rows straight from the server's database (read-only). */
export function checkpointRows(
  dataDir: string,
): Array<{ id: string; state: string; blob_key: string | null; sha256: string | null }> {
  const db = new Database(path.join(dataDir, "sandtree.db"), { readonly: true, fileMustExist: true });
  try {
    return db.prepare("SELECT id, state, blob_key, sha256 FROM checkpoints").all() as any;
  } finally {
    db.close();
  }
}

export function qemuPidOf(id: string): number {
  const line = qemuPidsFor([id])[0];
  if (!line) throw new Error(`no QEMU for ${id}`);
  return Number(line.split(" ")[0]);
}

/**
 * Figures of one test for docs/reliability.md: `SANDTREE_RELIABILITY_OUT` (set by the report
 * script; default a temporary directory) gets one JSON file per suite file, merged by test key.
 */
export function recordFigures(
  suite: string,
  key: string,
  entry: { tried: string; result: string; figures?: Record<string, unknown> },
) {
  const dir = process.env.SANDTREE_RELIABILITY_OUT ?? path.join(tmpdir(), "sandtree-reliability");
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${suite}.json`);
  let all: Record<string, unknown> = {};
  try {
    all = JSON.parse(readFileSync(file, "utf8"));
  } catch {}
  all[key] = entry;
  writeFileSync(file, `${JSON.stringify(all, null, 2)}\n`);
}

/**
 * SIGKILLs every QEMU whose command line names one of `needles` (a data dir, a socket directory)
 * and waits until they are gone; returns how many there were. For afterAll hooks: whatever a
 * failed or timed-out test left, no VM of it outlives the file.
 */
export async function killQemusMatching(needles: string[], waitMs = 10_000): Promise<number> {
  const pids = (): number[] => {
    let out = "";
    try {
      out = execFileSync("pgrep", ["-af", "qemu-system"], { encoding: "utf8" });
    } catch {}
    return out
      .split("\n")
      .filter((l) => needles.some((n) => n && l.includes(n)))
      .map((l) => Number.parseInt(l, 10))
      .filter((p) => p > 1);
  };
  const found = pids();
  for (const pid of found) {
    try {
      process.kill(pid, "SIGCONT");
      process.kill(pid, "SIGKILL");
    } catch {}
  }
  await eventually(() => pids().length === 0, waitMs, 100);
  return found.length;
}

/** `p`, or `fallback` once `ms` passed (hooks must not hang on a stuck close). */
export function within<T>(p: Promise<T>, ms: number, fallback: T): Promise<T> {
  return Promise.race([p, sleep(ms).then(() => fallback)]);
}

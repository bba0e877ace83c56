// Shared pieces of the hostile-guest suite (docs/hostile-guests.md): an in-process server, the
// impostor agent (impostor.c) built static and put into sandboxes, and the checks every case ends
// with: the neighbour still runs `exec true`, the API answers, the server's memory stayed bounded.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startTestServer, type TestServer } from "../helpers.js";

/** How much the server's resident memory may grow over a case (generous: GC runs when it likes). */
export const MEMORY_GROWTH_MAX_MIB = 256;
/** The liveness watchdog's deadline for these servers: a silent guest is failed after it. */
export const AGENT_DEADLINE_MS = 10_000;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** An in-process server with sandbox networking off (network cases: network.test.ts). */
export function startHostileServer(): Promise<TestServer> {
  return startTestServer({ deadlines: { agentMs: AGENT_DEADLINE_MS } });
}

/** Builds impostor.c static with the host's gcc (as the guest agent is built) and returns its bytes. */
export function buildImpostor(): Uint8Array {
  const dir = mkdtempSync(path.join(tmpdir(), "sandtree-impostor-"));
  try {
    const src = fileURLToPath(new URL("./impostor.c", import.meta.url));
    const out = path.join(dir, "impostor");
    execFileSync("gcc", ["-static", "-O1", "-Wall", "-o", out, src], { stdio: ["ignore", "ignore", "pipe"] });
    return new Uint8Array(readFileSync(out));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function createBusybox(t: TestServer): Promise<string> {
  const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
  if (r.status !== 201) throw new Error(`create failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.id as string;
}

export async function putImpostor(t: TestServer, id: string, bin: Uint8Array): Promise<void> {
  const up = await t.api("PUT", `/v1/sandboxes/${id}/files?path=/tmp/impostor&mode=755`, bin, {
    "content-type": "application/octet-stream",
  });
  if (up.status >= 300) throw new Error(`upload failed: ${up.status} ${JSON.stringify(up.body)}`);
}

export const exec = (t: TestServer, id: string, command: string, signal?: AbortSignal) =>
  fetch(`${t.url}/v1/sandboxes/${id}/exec`, {
    method: "POST",
    headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json" },
    body: JSON.stringify({ command }),
    ...(signal ? { signal } : {}),
  }).then(async (r) => ({ status: r.status, body: JSON.parse(await r.text()) }));

/** Starts the impostor in the background (as root, like anything a sandbox runs). */
export async function launchImpostor(t: TestServer, id: string, args: string): Promise<void> {
  const r = await exec(t, id, `setsid /tmp/impostor ${args} </dev/null >/tmp/impostor.log 2>&1 &`);
  if (r.status !== 200 || r.body.exit_code !== 0) throw new Error(`launch failed: ${JSON.stringify(r.body)}`);
}

/**
 * Waits until the impostor holds the port: it answers a file read with "impostor" where the real
 * agent says the file is missing. A read the agent took just as it was stopped is never answered:
 * each try gives up after a while and the next one asks again.
 */
export async function waitImpostor(t: TestServer, id: string): Promise<void> {
  for (let i = 0; i < 120; i++) {
    const text = await fetch(`${t.url}/v1/sandboxes/${id}/files?path=/tmp/impostor.probe`, {
      headers: { authorization: `Bearer ${t.key}` },
      signal: AbortSignal.timeout(5000),
    })
      .then((r) => r.text())
      .catch(() => "");
    if (text === "impostor") return;
    await sleep(250);
  }
  throw new Error(`the impostor in ${id} never took the port`);
}

/** The sandbox's status and error reason once it is no longer RUNNING (or still RUNNING at the deadline). */
export async function settledStatus(t: TestServer, id: string, timeoutMs = 120_000): Promise<{ status: string; reason: string }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await t.api("GET", `/v1/sandboxes/${id}`);
    if (r.body.status !== "RUNNING" || Date.now() > deadline)
      return { status: r.body.status, reason: String(r.body.error_reason ?? "") };
    await sleep(200);
  }
}

/** The neighbour runs `exec true`, the API answers, and the server's memory grew less than the bound. */
export async function expectHealthy(t: TestServer, neighbour: string, rssBefore: number): Promise<string[]> {
  const wrong: string[] = [];
  const r = await exec(t, neighbour, "true");
  if (r.status !== 200 || r.body.exit_code !== 0) wrong.push(`neighbour exec true: ${r.status} ${JSON.stringify(r.body)}`);
  const health = await fetch(`${t.url}/healthz`);
  if (health.status !== 200) wrong.push(`healthz ${health.status}`);
  const list = await t.api("GET", "/v1/sandboxes");
  if (list.status !== 200) wrong.push(`list ${list.status}`);
  const grewMiB = (process.memoryUsage().rss - rssBefore) / 2 ** 20;
  if (grewMiB > MEMORY_GROWTH_MAX_MIB) wrong.push(`server memory grew ${grewMiB.toFixed(0)} MiB`);
  return wrong;
}

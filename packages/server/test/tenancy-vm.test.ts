// With a real VM: team isolation (an attacker's key sees a foreign sandbox exactly like a
// missing one) and secrets (usable inside the sandbox, never shown, logged or stored in clear).
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

const SECRET = `s3cr3t-${randomBytes(12).toString("hex")}`;
const logLines: string[] = [];
const bodies: string[] = [];
let t: TestServer;
let id: string;
let attacker: string;

/** Every answer body the owner saw, kept to scan for the secret. */
async function owner(method: string, p: string, body?: unknown) {
  const r = await t.api(method, p, body);
  bodies.push(typeof r.body === "string" ? r.body : JSON.stringify(r.body));
  return r;
}
const as = (key: string) => (method: string, p: string, body?: unknown) =>
  t.api(method, p, body, { authorization: `Bearer ${key}` });

const CREATE = {
  image: "sandtree/busybox",
  memory_gb: 0.25,
  disk_size_gb: 1,
  environment_vars: { PLAIN: "visible", MYSECRET: "overridden" },
  secrets: { MYSECRET: SECRET },
  start_command: 'echo "$MYSECRET" > /tmp/from-start',
  idempotency_key: "vm-1",
  labels: { owner: "a" },
};

beforeAll(async () => {
  t = await startTestServer({ logStream: { write: (line: string) => logLines.push(line) } });
  const created = await owner("POST", "/v1/sandboxes", CREATE);
  expect(created.status).toBe(201);
  id = created.body.id;
  await t.waitRunning(id);
  await t.api("POST", "/v1/teams", { name: "attackers" });
  attacker = (await t.api("POST", "/v1/keys", { team: "attackers" })).body.key;
});
afterAll(async () => {
  await t?.close();
});

describe("secrets", () => {
  it("reach every exec and the start command, and are masked in every answer", async () => {
    const run = await owner("POST", `/v1/sandboxes/${id}/exec`, { command: 'echo "$MYSECRET $PLAIN"' });
    expect(run.body.stdout).toBe(`${SECRET} visible\n`);
    bodies.pop(); // the user's own command printed it: that answer is theirs to see
    let fromStart = "";
    for (let i = 0; i < 50 && !fromStart.includes(SECRET); i++) {
      fromStart = (await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "cat /tmp/from-start 2>/dev/null" })).body.stdout;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(fromStart).toBe(`${SECRET}\n`);

    const get = await owner("GET", `/v1/sandboxes/${id}`);
    expect(get.body.secrets).toEqual({ MYSECRET: "***" });
    const list = await owner("GET", "/v1/sandboxes");
    expect(list.body.sandboxes[0].secrets).toEqual({ MYSECRET: "***" });
    // The same create again (same idempotency key): the first answer, secrets still masked.
    const replay = await owner("POST", "/v1/sandboxes", CREATE);
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ id, secrets: { MYSECRET: "***" } });
    const mismatch = await owner("POST", "/v1/sandboxes", {
      image: "sandtree/busybox",
      secrets: { MYSECRET: `${SECRET}x` },
      idempotency_key: "vm-1",
    });
    expect(mismatch.body.code).toBe("IDEMPOTENCY_MISMATCH");
    const invalid = await owner("POST", "/v1/sandboxes", { image: "sandtree/busybox", secrets: { MYSECRET: SECRET }, bogus: 1 });
    expect(invalid.status).toBe(400);
    await owner("GET", `/v1/sandboxes/${id}/logs`);
    await owner("GET", `/v1/sandboxes/${id}/files?path=/etc/hostname`);
  });

  it("never appear in answers, logs, the database or the sandbox's log files", async () => {
    expect(bodies.length).toBeGreaterThan(5);
    for (const b of bodies) expect(b).not.toContain(SECRET);
    expect(logLines.length).toBeGreaterThan(5);
    expect(logLines.join("")).not.toContain(SECRET);
    // Everything the server wrote outside the guest's own disk (SQLite with its WAL, logs, keys),
    // except `outputs/`: kept output of the user's own commands, which printed the secret.
    const needle = Buffer.from(SECRET);
    const scan = (dir: string): string[] =>
      readdirSync(dir).flatMap((name) => {
        const p = path.join(dir, name);
        if (statSync(p).isDirectory()) return name === "disk" || name === "outputs" ? [] : scan(p);
        return readFileSync(p).includes(needle) ? [p] : [];
      });
    const files = readdirSync(t.dataDir);
    expect(files).toContain("sandtree.db");
    expect(scan(t.dataDir)).toEqual([]);
    expect(statSync(path.join(t.dataDir, "server.key")).mode & 0o777).toBe(0o600);
  });
});

describe("isolation between teams", () => {
  /** Status and body with ids and request ids taken out, to compare with a missing id's answer. */
  const norm = (r: { status: number; body: unknown }, ids: string[]) => {
    let text = typeof r.body === "string" ? r.body : JSON.stringify(r.body);
    for (const x of ids) text = text.replaceAll(x, "<ID>");
    return { status: r.status, body: text.replace(/"request_id":"[^"]*"/, "") };
  };

  it("answers a foreign sandbox exactly like a missing one, on every route", async () => {
    const evil = as(attacker);
    // A live exec of the owner, for the exec routes.
    const ctrl = new AbortController();
    const res = await fetch(`${t.url}/v1/sandboxes/${id}/exec`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json", accept: "application/x-ndjson" },
      body: JSON.stringify({ command: "sleep 60", stdin_open: true }),
      signal: ctrl.signal,
    });
    const reader = res.body?.getReader();
    const first = JSON.parse(
      Buffer.from((await reader?.read())?.value ?? [])
        .toString()
        .split("\n")[0] ?? "{}",
    );
    const execId: string = first.exec_id;
    expect(execId).toMatch(/^ex-/);

    const missing = "sb-aaaaaaaaaaaaaaaa";
    const missingExec = "ex-0000000000000000";
    const routes: Array<[string, (sb: string, ex: string) => string, unknown?]> = [
      ["GET", (sb) => `/v1/sandboxes/${sb}`],
      ["GET", (sb) => `/v1/sandboxes/${sb}/logs`],
      ["POST", (sb) => `/v1/sandboxes/${sb}/exec`, { command: "touch /tmp/pwned" }],
      ["POST", (sb, ex) => `/v1/sandboxes/${sb}/execs/${ex}/signal`, { signal: "SIGKILL" }],
      ["POST", (sb, ex) => `/v1/sandboxes/${sb}/execs/${ex}/stdin`, new Uint8Array([1])],
      ["GET", (sb) => `/v1/sandboxes/${sb}/files?path=/etc/hostname`],
      ["PUT", (sb) => `/v1/sandboxes/${sb}/files?path=/tmp/pwned`, new Uint8Array([1, 2, 3])],
      ["DELETE", (sb) => `/v1/sandboxes/${sb}/files?path=/etc/hostname`],
      ["GET", (sb) => `/v1/sandboxes/${sb}/files/stat?path=/etc`],
      ["GET", (sb) => `/v1/sandboxes/${sb}/files/list?path=/`],
      ["POST", (sb) => `/v1/sandboxes/${sb}/files/mkdir`, { path: "/tmp/pwned-dir" }],
      ["DELETE", (sb) => `/v1/sandboxes/${sb}`],
    ];
    for (const [method, p, body] of routes) {
      const foreign = await evil(method, p(id, execId), body);
      const absent = await evil(method, p(missing, missingExec), body);
      expect(foreign.status, `${method} ${p(id, execId)}`).toBe(404);
      expect(norm(foreign, [id, execId]), `${method} ${p(id, execId)}`).toEqual(norm(absent, [missing, missingExec]));
    }
    const theirs = await evil("GET", "/v1/sandboxes");
    expect(theirs.body.sandboxes).toEqual([]);
    expect((await evil("GET", "/v1/sandboxes?label=owner=a")).body.sandboxes).toEqual([]);

    // Nothing the attacker tried happened: the sandbox runs, its files and exec are intact.
    expect((await t.api("GET", `/v1/sandboxes/${id}`)).body.status).toBe("RUNNING");
    const check = await t.api("POST", `/v1/sandboxes/${id}/exec`, {
      command: "ls /tmp/pwned /tmp/pwned-dir 2>&1; cat /etc/hostname >/dev/null && echo ok",
    });
    expect(check.body.stdout).toMatch(/No such file.*\n.*No such file.*\nok\n/s);
    const sig = await t.api("POST", `/v1/sandboxes/${id}/execs/${execId}/signal`, { signal: "SIGKILL" });
    expect(sig.status).toBe(204);
    ctrl.abort();
  });

  it("a revoked key is refused at once", async () => {
    const k = (await t.api("POST", "/v1/keys", { team: "attackers" })).body;
    expect((await as(k.key)("GET", "/v1/sandboxes")).status).toBe(200);
    expect((await t.api("DELETE", `/v1/keys/${k.id}`)).status).toBe(200);
    const after = await as(k.key)("GET", `/v1/sandboxes/${id}`);
    expect(after.status).toBe(401);
    expect(after.body.code).toBe("UNAUTHORIZED");
  });
});

import { createHash, randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { qemuPidsFor, startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;
let id: string;

beforeAll(async () => {
  t = await startTestServer();
  const r = await t.api("POST", "/v1/sandboxes", {
    image: "sandtree/busybox",
    memory_gb: 0.25,
    disk_size_gb: 2,
    environment_vars: { GREETING: "hello" },
    labels: { suite: "vm" },
  });
  expect(r.status).toBe(201);
  expect(r.body.status).toBe("PENDING");
  id = r.body.id;
  await t.waitRunning(id);
});
afterAll(async () => {
  await t?.close();
});

const run = async (command: string | string[], extra: Record<string, unknown> = {}) => {
  const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command, ...extra });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { stdout: string; stderr: string; exit_code: number; signal: number | null; timed_out: boolean };
};

describe("a busybox sandbox on a real microVM", () => {
  it("runs the guest kernel with the agent as PID 1", async () => {
    const release = readFileSync(
      path.join(process.env.SANDTREE_CACHE_DIR ?? path.join(process.env.HOME ?? "/root", ".cache/sandtree"), "kernel/release"),
      "utf8",
    ).trim();
    const uname = await run(["uname", "-r"]);
    expect(uname.stdout.trim()).toBe(release);
    const pid1 = await run("cat /proc/1/comm; ls /init 2>/dev/null || echo no-init-in-image");
    expect(pid1.stdout).toContain("no-init-in-image");
    expect(pid1.stdout.split("\n")[0]).toMatch(/init|sandtree/);
  });

  it("returns exit codes exactly and keeps stdout and stderr apart and in order", async () => {
    expect((await run("true")).exit_code).toBe(0);
    expect((await run("false")).exit_code).toBe(1);
    expect((await run("exit 42")).exit_code).toBe(42);
    const r = await run("echo one; echo two >&2; echo three; echo four >&2");
    expect(r.stdout).toBe("one\nthree\n");
    expect(r.stderr).toBe("two\nfour\n");
    const missing = await run(["/no/such/binary"]);
    expect(missing.exit_code).toBe(127);
  });

  it("passes env, cwd, user and stdin; sandbox env is inherited", async () => {
    const r = await run("echo $GREETING $EXTRA; pwd; id -u", { env: { EXTRA: "world" }, cwd: "/tmp", user: "user" });
    expect(r.stdout).toBe("hello world\n/tmp\n1000\n");
    const s = await run(["cat"], { stdin: "from stdin" });
    expect(s.stdout).toBe("from stdin");
  });

  it("kills on timeout with 124 and reports 137 after SIGKILL", async () => {
    const to = await run("sleep 30", { timeout_seconds: 1 });
    expect(to.timed_out).toBe(true);
    expect(to.exit_code).toBe(124);

    const res = await fetch(`${t.url}/v1/sandboxes/${id}/exec`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json", accept: "application/x-ndjson" },
      body: JSON.stringify({ command: "echo started; sleep 60" }),
    });
    expect(res.headers.get("content-type")).toContain("application/x-ndjson");
    const reader = res.body!.getReader();
    let buf = "";
    let execId = "";
    while (!execId || !buf.includes("stdout")) {
      const { value } = await reader.read();
      buf += new TextDecoder().decode(value);
      const m = /"exec_id":"([^"]+)"/.exec(buf);
      if (m?.[1]) execId = m[1];
    }
    const k = await t.api("POST", `/v1/sandboxes/${id}/execs/${execId}/signal`, { signal: "SIGKILL" });
    expect(k.status).toBe(204);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += new TextDecoder().decode(value);
    }
    const events = buf
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    const exit = events.find((e) => e.type === "exit");
    expect(exit.exit_code).toBe(137);
    expect(exit.signal).toBe(9);
    expect(Buffer.from(events.find((e) => e.type === "stdout").data, "base64").toString()).toBe("started\n");
  });

  it("kills a silent streamed command when its client disconnects", async () => {
    const abort = new AbortController();
    const res = await fetch(`${t.url}/v1/sandboxes/${id}/exec`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json", accept: "application/x-ndjson" },
      body: JSON.stringify({ command: ["sleep", "3017"] }),
      signal: abort.signal,
    });
    const reader = res.body!.getReader();
    let buf = "";
    while (!buf.includes('"started"')) buf += new TextDecoder().decode((await reader.read()).value);
    expect((await run("ps -o args | grep -c '^sleep 3017'")).stdout.trim()).toBe("1");
    abort.abort();
    // The command never writes, so only the disconnect can end it; poll until it is gone.
    let left = "1";
    for (let i = 0; i < 100 && left !== "0"; i++) {
      left = (await run("ps -o args | grep -c '^sleep 3017'")).stdout.trim();
      if (left !== "0") await new Promise((r) => setTimeout(r, 100));
    }
    expect(left).toBe("0");
  });

  it("streams SSE events", async () => {
    const res = await fetch(`${t.url}/v1/sandboxes/${id}/exec`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({ command: ["echo", "sse"] }),
    });
    const text = await res.text();
    expect(text).toContain("event: started");
    expect(text).toContain("event: exit");
    expect(text).toContain(Buffer.from("sse\n").toString("base64"));
  });

  it("round-trips a 100 MiB file with the same sha256", async () => {
    const data = randomBytes(100 * 1024 * 1024);
    const sha = createHash("sha256").update(data).digest("hex");
    const up = await t.api("PUT", `/v1/sandboxes/${id}/files?path=/root/big.bin`, new Uint8Array(data), {
      "content-type": "application/octet-stream",
    });
    expect(up.status, JSON.stringify(up.body)).toBe(200);
    expect(up.body).toEqual({ path: "/root/big.bin", bytes: data.length });
    expect((await run(["sha256sum", "/root/big.bin"])).stdout.split(" ")[0]).toBe(sha);
    const res = await fetch(`${t.url}/v1/sandboxes/${id}/files?path=/root/big.bin`, {
      headers: { authorization: `Bearer ${t.key}` },
    });
    expect(res.status).toBe(200);
    const back = Buffer.from(await res.arrayBuffer());
    expect(back.length).toBe(data.length);
    expect(createHash("sha256").update(back).digest("hex")).toBe(sha);
    const part = await fetch(`${t.url}/v1/sandboxes/${id}/files?path=/root/big.bin&offset=1000&length=10`, {
      headers: { authorization: `Bearer ${t.key}` },
    });
    expect(Buffer.from(await part.arrayBuffer()).equals(data.subarray(1000, 1010))).toBe(true);
    await run("rm /root/big.bin");
  });

  it("stats, lists, makes and removes paths, with clear codes", async () => {
    const mk = await t.api("POST", `/v1/sandboxes/${id}/files/mkdir`, { path: "/work/a/b" });
    expect(mk.status).toBe(201);
    expect(mk.body.type).toBe("dir");
    await t.api("PUT", `/v1/sandboxes/${id}/files?path=/work/a/b/f.txt&mode=600`, new TextEncoder().encode("hi"), {
      "content-type": "application/octet-stream",
    });
    const st = await t.api("GET", `/v1/sandboxes/${id}/files/stat?path=/work/a/b/f.txt`);
    expect(st.body).toMatchObject({ path: "/work/a/b/f.txt", type: "file", size: 2, mode: 0o600 });
    const ls = await t.api("GET", `/v1/sandboxes/${id}/files/list?path=/work/a/b`);
    expect(ls.body.entries.map((e: { name: string }) => e.name)).toEqual(["f.txt"]);
    const missing = await t.api("GET", `/v1/sandboxes/${id}/files?path=/nope`);
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe("FILE_NOT_FOUND");
    const notEmpty = await t.api("DELETE", `/v1/sandboxes/${id}/files?path=/work/a`);
    expect(notEmpty.status).toBe(409);
    const rm = await t.api("DELETE", `/v1/sandboxes/${id}/files?path=/work/a&recursive=true`);
    expect(rm.status).toBe(204);
    const traversal = await t.api("GET", `/v1/sandboxes/${id}/files/stat?path=../../etc/passwd`);
    expect(traversal.body.path).toBe("/etc/passwd");
  });

  it("grows the root filesystem to disk_size_gb", async () => {
    const df = await run(["df", "-k", "/"]);
    const kb = Number(df.stdout.trim().split("\n")[1]?.split(/\s+/)[1]);
    expect(kb).toBeGreaterThan(1.8 * 1024 * 1024);
  });

  it("keeps logs and answers 409 once deleted, leaving no VM, disk or socket", async () => {
    const logs = await t.api("GET", `/v1/sandboxes/${id}/logs`);
    expect(logs.status).toBe(200);
    expect(logs.body.events.length).toBeGreaterThan(0);
    const del = await t.api("DELETE", `/v1/sandboxes/${id}`);
    expect(del.body.status).toBe("TERMINATED");
    const again = await t.api("DELETE", `/v1/sandboxes/${id}`);
    expect(again.status).toBe(200);
    const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "true" });
    expect(r.status).toBe(409);
    expect(r.body.code).toBe("SANDBOX_NOT_RUNNING");
    expect(qemuPidsFor([id])).toEqual([]);
    expect(existsSync(path.join(t.dataDir, "sandboxes", id, "disk"))).toBe(false);
    expect(readdirSync(path.join(t.dataDir, "layers")).filter((f) => f.includes(id))).toEqual([]);
    expect(readdirSync(path.join(t.dataDir, "machine-logs", `sandtree-${id}`))).toContain("console.log");
  });
});

/**
 * The CLI against a real server and real VMs, for what a newcomer hit in #21: each check is one
 * of the items and failed before its fix. One busybox sandbox serves most of them.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

const CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../cli/dist/main.js");
let t: TestServer;
let work: string;
let id: string;

function start(args: string[]): ChildProcess {
  return spawn(process.execPath, [CLI, ...args], {
    env: { ...process.env, SANDTREE_API_URL: t.url, SANDTREE_API_KEY: t.key },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** Runs the CLI as a child process (async: the server under test shares this event loop). */
function sandtree(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = start(args);
    let stdout = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr?.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

beforeAll(async () => {
  // Names without a registry go to a default registry that never answers (Docker Hub's stand-in,
  // so the answer does not depend on whether this machine reaches Docker Hub).
  t = await startTestServer({ defaultRegistry: "127.0.0.1:1" });
  work = mkdtempSync(path.join(tmpdir(), "sandtree-cli21-"));
  const r = await sandtree(["sandbox", "create", "sandtree/busybox", "--memory-gb", "0.25", "--disk-size-gb", "1", "--wait"]);
  expect(r.code, r.stderr).toBe(0);
  id = r.stdout.trim();
});
afterAll(async () => {
  await t?.close();
  rmSync(work, { recursive: true, force: true });
});

describe("the CLI does what its help says (#21)", () => {
  it("item 2: run --timeout exits 124", async () => {
    const r = await sandtree(["sandbox", "run", id, "--timeout", "1", "--", "sleep", "10"]);
    expect(r.code).toBe(124);
  });

  it("item 4: a job's ended_at is not before its started_at, whatever the guest's clock says", async () => {
    // The guest's clock an hour behind the host's, as after a restore of an old snapshot.
    const back = await sandtree(["sandbox", "run", id, "--shell", 'date -s "@$(( $(date +%s) - 3600 ))" >/dev/null']);
    expect(back.code, back.stderr).toBe(0);
    try {
      const started = await sandtree(["sandbox", "job", "start", id, "--", "true"]);
      expect(started.code, started.stderr).toBe(0);
      const jobId = started.stdout.trim();
      expect((await sandtree(["sandbox", "job", "logs", id, jobId, "--follow"])).code).toBe(0);
      const j = JSON.parse((await sandtree(["sandbox", "job", "get", id, jobId, "-o", "json"])).stdout);
      expect(j.status).toBe("EXITED");
      expect(Date.parse(j.ended_at)).toBeGreaterThanOrEqual(Date.parse(j.started_at));
    } finally {
      await sandtree(["sandbox", "run", id, "--shell", 'date -s "@$(( $(date +%s) + 3600 ))" >/dev/null']);
    }
  });

  it("item 7: job logs --follow of a failed job says so and exits with its code", async () => {
    const started = await sandtree(["sandbox", "job", "start", id, "--shell", "echo working; exit 3"]);
    const r = await sandtree(["sandbox", "job", "logs", id, started.stdout.trim(), "--follow"]);
    expect(r).toMatchObject({ code: 3, stdout: "working\n", stderr: "job exited 3\n" });
    const long = await sandtree(["sandbox", "job", "start", id, "--", "sleep", "600"]);
    const killed = await sandtree(["sandbox", "job", "kill", id, long.stdout.trim(), "-o", "json"]);
    expect(killed.code, killed.stderr).toBe(0);
    expect(JSON.parse(killed.stdout).status).toBe("KILLED");
  });

  it("item 9: copies name their paths, and a download into a directory keeps the file's name", async () => {
    const down = await sandtree(["sandbox", "download", id, "/etc/hostname", work]);
    expect(down.code, down.stderr).toBe(0);
    expect(down.stdout).toBe(`${path.join(work, "hostname")}\n`);
    expect(existsSync(path.join(work, "hostname"))).toBe(true);
    const missingLocal = await sandtree(["sandbox", "upload", id, path.join(work, "nope.csv"), "/root/x"]);
    expect(missingLocal.code).toBe(1);
    expect(missingLocal.stderr).toMatch(/^error: ENOENT: no such file/);
    const missing = await sandtree(["sandbox", "download", id, "/root/nope", path.join(work, "x")]);
    expect(missing.stderr).toMatch(/FILE_NOT_FOUND: \/root\/nope: /);
    const dir = await sandtree(["sandbox", "download", id, "/etc", path.join(work, "x")]);
    expect(dir.stderr).toMatch(/IS_A_DIRECTORY: \/etc is a directory/);
    const upDir = await sandtree(["sandbox", "upload", id, path.join(work, "hostname"), "/tmp/"]);
    expect(upDir).toMatchObject({ code: 0, stdout: "/tmp/hostname\n" });
  });

  it("item 10: port-forward to a port where nothing listens prints one clear error per connection", async () => {
    const fwd = start(["sandbox", "port-forward", id, "9", "--local", "0"]);
    let stdout = "";
    let stderr = "";
    fwd.stdout?.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    fwd.stderr?.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    while (!stdout.includes("\n")) await new Promise((r) => setTimeout(r, 50));
    const [host, port] = stdout.trim().split(":");
    const sock = net.connect(Number(port), host);
    sock.on("error", () => {});
    await new Promise((r) => sock.once("close", r));
    // The error is written before the local socket is closed; give a second one time to arrive.
    await new Promise((r) => setTimeout(r, 500));
    const exited = new Promise((r) => fwd.once("exit", r));
    fwd.kill("SIGINT");
    await exited;
    const errors = stderr.split("\n").filter((l) => l.startsWith("error:"));
    expect(errors, stderr).toHaveLength(1);
    expect(errors[0]).not.toContain("WebSocket was closed");
  });

  it("item 8: errors point the right way", async () => {
    const unreachable = await sandtree(["image", "pull", "127.0.0.1:1/team/tool:1.2"]);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain("REGISTRY_UNREACHABLE");
    expect(unreachable.stderr).not.toContain("pull it first");
    // A short name's failure says where it was looked for and how to point it elsewhere.
    const tagged = await sandtree(["sandbox", "create", "alpine:3.20"]);
    expect(tagged.code).toBe(1);
    expect(tagged.stderr).toContain("REGISTRY_UNREACHABLE");
    expect(tagged.stderr).toContain("alpine:3.20 has no registry, so it was asked of the default registry 127.0.0.1:1");
    expect(tagged.stderr).toContain("SANDTREE_DEFAULT_REGISTRY");
    expect(tagged.stderr).toContain("sandtree image alias");
    expect((await sandtree(["sandbox", "pause", id])).code).toBe(0);
    const paused = await sandtree(["sandbox", "run", id, "--", "true"]);
    expect(paused.stderr).toContain("SANDBOX_NOT_RUNNING");
    expect(paused.stderr).toContain("resume it");
    expect(paused.stderr).not.toContain("waitForCreation");
    expect((await sandtree(["sandbox", "resume", id])).code).toBe(0);
  });

  it("items 3 and 11: a restore keeps the source's memory without -y; checkpoint get prints key: value", async () => {
    const ck = await sandtree(["sandbox", "checkpoint", "create", id, "--wait"]);
    expect(ck.code, ck.stderr).toBe(0);
    const cid = ck.stdout.trim();
    const got = await sandtree(["sandbox", "checkpoint", "get", cid]);
    expect(got.stdout).toMatch(new RegExp(`^id: +${cid}\nstate: +DURABLE\n`));
    const restored = await sandtree(["sandbox", "checkpoint", "restore", cid, "--wait", "-o", "json"]);
    expect(restored.code, restored.stderr).toBe(0);
    const child = JSON.parse(restored.stdout);
    expect(child).toMatchObject({ status: "RUNNING", memory_gb: 0.25, disk_size_gb: 1 });
    const del = await sandtree(["sandbox", "delete", child.id, "-y", "-o", "json"]);
    expect(JSON.parse(del.stdout)).toEqual([child.id]);
    const ended = await sandtree(["sandbox", "run", child.id, "--", "true"]);
    expect(ended.stderr).toContain("has ended");
  });

  it("item 12: sandbox logs shows the boot's progress before the console", async () => {
    const r = await sandtree(["sandbox", "logs", id]);
    expect(r.code).toBe(0);
    const [events = "", consoleText] = r.stdout.split("--- console ---\n");
    expect(events).toMatch(/created from sandtree\/busybox/);
    expect(events).toMatch(/image ready \(sha256:/);
    expect(events).toMatch(/starting the VM \((cold boot|warm start from a booted template), 1 cpu, 256 MiB\)/);
    expect(events).toMatch(/running \(/);
    expect(consoleText).toBeDefined();
    expect(readFileSync(path.join(work, "hostname"), "utf8").length).toBeGreaterThan(0);
  });
});

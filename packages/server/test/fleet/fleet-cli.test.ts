// The CLI of fleet mode against a real server (no VM): `sandtree worker` joins and heartbeats
// as a child process, `sandtree host list|drain|uncordon` show and change it.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { availableParallelism } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runCli, serverForFile, tempDirForFile } from "../helpers.js";

const CLI_MAIN = path.resolve(import.meta.dirname, "../../../cli/dist/main.js");

/** `sandtree worker ...` as a child; resolves once it says it joined (or it exits). */
function startWorker(args: string[]) {
  const child = spawn(process.execPath, [CLI_MAIN, "worker", ...args], {
    env: { ...process.env, SANDTREE_NETWORK: "off" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  const joined = new Promise<void>((resolve) => {
    child.stdout.on("data", () => stdout.includes("joined") && resolve());
    void exited.then(() => resolve());
  });
  return { child, joined, exited, out: () => stdout, err: () => stderr };
}

describe("sandtree worker and sandtree host", () => {
  const t = serverForFile();
  const dir = tempDirForFile("sandtree-worker-");

  it("a wrong join token is refused with its code; the worker exits non-zero", async () => {
    const w = startWorker([
      "--join",
      t.url,
      "--join-token",
      "stj_wrong",
      "--name",
      "cli-bad",
      "--data-dir",
      dir,
      "--accel",
      "tcg",
      "--listen",
      "127.0.0.1:0",
    ]);
    expect(await w.exited).toBe(1);
    expect(w.err()).toContain("UNAUTHORIZED");
    expect(w.out()).not.toContain("joined");
  });

  it("joins with this machine's capacity, shows in host list, drains, and stops on SIGTERM", async () => {
    const token = t.server.services.fleet.joinToken;
    const w = startWorker([
      ...["--join", t.url, "--join-token", token, "--name", "cli-w1"],
      ...["--data-dir", dir, "--accel", "tcg", "--listen", "127.0.0.1:0"],
    ]);
    await w.joined;
    expect(w.out()).toMatch(/joined .* sandboxes served at http:\/\/127\.0\.0\.1:\d+/);
    try {
      const json = await runCli(t, ["host", "list", "-o", "json"]);
      expect(json.code).toBe(0);
      const hosts = JSON.parse(json.stdout).hosts as Array<{
        name: string;
        state: string;
        capacity: { vcpus: number; accel: string };
      }>;
      expect(hosts.map((h) => h.name)).toEqual(["cli-w1", "local"]);
      expect(hosts[0]).toMatchObject({ state: "ACTIVE", capacity: { vcpus: availableParallelism(), accel: "tcg" } });
      expect(JSON.stringify(hosts)).not.toContain(token);

      const table = await runCli(t, ["host", "list"]);
      const lines = table.stdout.trim().split("\n");
      expect(lines[0]).toMatch(/^NAME\s+STATE\s+VCPUS\s+MEMORY GiB\s+DISK GiB\s+SANDBOXES\s+ACCEL\s+IMAGES\s+HEARTBEAT$/);
      expect(lines[1]).toMatch(new RegExp(`^cli-w1\\s+ACTIVE\\s+0/${availableParallelism()}\\s`));

      const drain = await runCli(t, ["host", "drain", "cli-w1"]);
      expect([drain.code, drain.stdout]).toEqual([0, "cli-w1 CORDONED: 0 sandboxes still there, staying until they end\n"]);
      const missing = await runCli(t, ["host", "cordon", "nope"]);
      expect(missing.code).not.toBe(0);
      expect(missing.stderr).toContain("HOST_NOT_FOUND");
      const back = await runCli(t, ["host", "uncordon", "cli-w1", "-o", "json"]);
      expect(JSON.parse(back.stdout)).toMatchObject({ host: { name: "cli-w1", state: "ACTIVE" }, remaining_sandboxes: 0 });
    } finally {
      w.child.kill("SIGTERM");
    }
    expect(await w.exited).toBe(0);
    expect(w.out()).toMatch(/stopped after \d+ heartbeats/);
  });

  it("--join takes several control planes (the first that answers wins); --vcpus sets the vCPUs offered", async () => {
    const bad = startWorker(["--join", t.url, "--join-token", "x", "--vcpus", "0"]);
    expect(await bad.exited).toBe(2);
    expect(bad.err()).toContain("--vcpus");
    // A port nothing listens on: the control plane there is gone.
    const gone = await new Promise<number>((resolve) => {
      const srv = createServer().listen(0, "127.0.0.1", () => {
        const port = (srv.address() as AddressInfo).port;
        srv.close(() => resolve(port));
      });
    });
    const token = t.server.services.fleet.joinToken;
    const w = startWorker([
      ...["--join", `http://127.0.0.1:${gone},${t.url}`, "--join-token", token, "--name", "cli-w2", "--vcpus", "7"],
      ...["--data-dir", mkdtempSync(path.join(dir, "w2-")), "--accel", "tcg", "--listen", "127.0.0.1:0"],
    ]);
    await w.joined;
    try {
      expect(w.out()).toContain(`joined ${t.url} as cli-w2`);
      const json = await runCli(t, ["host", "list", "-o", "json"]);
      const hosts = JSON.parse(json.stdout).hosts as Array<{ name: string; capacity: { vcpus: number } }>;
      expect(hosts.find((h) => h.name === "cli-w2")?.capacity.vcpus).toBe(7);
    } finally {
      w.child.kill("SIGTERM");
    }
    expect(await w.exited).toBe(0);
  });
});

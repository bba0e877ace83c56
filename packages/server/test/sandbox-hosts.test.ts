// Where a sandbox runs and what no host can hold: sizes past every host's capacity are refused
// before anything starts (create, restore, fork), a VM that does not start says so in a sentence
// (QEMU's and QMP's words go to the log), and admin keys see (and filter by) each sandbox's host.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { cacheDir } from "@sandtree/host";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../src/index.js";
import { jsonApi, startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;
let id: string;
const small = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };

beforeAll(async () => {
  t = await startTestServer();
  const r = await t.api("POST", "/v1/sandboxes", small);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  id = r.body.id as string;
  await t.waitRunning(id);
}, 300_000);
afterAll(async () => {
  await t?.close();
});

async function localCapacity(): Promise<{ vcpus: number; memory_mib: number; disk_gib: number }> {
  const hosts = (await t.api("GET", "/v1/hosts")).body.hosts as Array<{ name: string; capacity: any }>;
  const local = hosts.find((h) => h.name === "local");
  expect(local, JSON.stringify(hosts)).toBeDefined();
  return local?.capacity;
}

describe("sizes no host can hold", () => {
  it("refuses a create with more memory, vCPUs or disk than the host has, naming both, and starts nothing", async () => {
    const cap = await localCapacity();
    const before = (await t.api("GET", "/v1/sandboxes")).body.sandboxes.length;
    const mem = await t.api("POST", "/v1/sandboxes", { ...small, memory_gb: 256 });
    expect([mem.status, mem.body.code]).toEqual([422, "EXCEEDS_HOST_CAPACITY"]);
    const hostGib = Number((cap.memory_mib / 1024).toFixed(2));
    expect(mem.body.message).toBe(`no host can hold 256 GiB of memory: the only host, local, has ${hostGib} GiB of memory`);
    expect(mem.body.details).toEqual({
      asked: { vcpus: 1, memory_mib: 262_144, disk_gib: 1 },
      largest: { host: "local", vcpus: cap.vcpus, memory_mib: cap.memory_mib, disk_gib: cap.disk_gib },
      exceeds: ["memory"],
    });
    const cpu = await t.api("POST", "/v1/sandboxes", { ...small, cpu_cores: cap.vcpus + 1 });
    expect([cpu.status, cpu.body.code]).toEqual([422, "EXCEEDS_HOST_CAPACITY"]);
    expect(cpu.body.message).toBe(`no host can hold ${cap.vcpus + 1} vCPUs: the only host, local, has ${cap.vcpus} vCPUs`);
    const disk = await t.api("POST", "/v1/sandboxes", { ...small, disk_size_gb: cap.disk_gib + 1 });
    expect([disk.status, disk.body.code]).toEqual([422, "EXCEEDS_HOST_CAPACITY"]);
    expect(disk.body.details.exceeds).toEqual(["disk"]);
    // Refused up front: no sandbox row, nothing placed.
    expect((await t.api("GET", "/v1/sandboxes")).body.sandboxes.length).toBe(before);
    // What the host has is still taken.
    const fits = await t.api("POST", "/v1/sandboxes", { ...small, cpu_cores: cap.vcpus });
    expect(fits.status, JSON.stringify(fits.body)).toBe(201);
    await t.api("DELETE", `/v1/sandboxes/${fits.body.id}`);
  });

  it("refuses a fork and a restore past the host the same way", async () => {
    const fork = await t.api("POST", `/v1/sandboxes/${id}/fork`, { memory_gb: 256 });
    expect([fork.status, fork.body.code], JSON.stringify(fork.body)).toEqual([422, "EXCEEDS_HOST_CAPACITY"]);
    // The fork's checkpoint was taken; a restore of it past the host is refused too.
    const cks = (await t.api("GET", `/v1/sandboxes/${id}/checkpoints`)).body.checkpoints as Array<{ id: string }>;
    expect(cks.length).toBeGreaterThan(0);
    const ck = cks[0]?.id ?? "";
    const deadline = Date.now() + 120_000;
    while ((await t.api("GET", `/v1/checkpoints/${ck}`)).body.state !== "DURABLE" && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
    }
    const restore = await t.api("POST", "/v1/sandboxes", { checkpoint_id: ck, cpu_cores: 64 });
    expect([restore.status, restore.body.code], JSON.stringify(restore.body)).toEqual([422, "EXCEEDS_HOST_CAPACITY"]);
    expect(restore.body.details.exceeds).toContain("vcpus");
  }, 180_000);
});

describe("the host of a sandbox", () => {
  it("shows admin keys the host in get and list, and filters the list by host", async () => {
    expect((await t.api("GET", `/v1/sandboxes/${id}`)).body.host).toBe("local");
    const all = (await t.api("GET", "/v1/sandboxes")).body.sandboxes as Array<{ id: string; status: string; host: unknown }>;
    expect(all.find((s) => s.id === id)?.host).toBe("local");
    // Every sandbox carries the field: its host while placed, null once ended.
    for (const s of all) expect(s.host).toBe(["TERMINATED", "ERROR", "TIMEOUT"].includes(s.status) ? null : "local");
    const onLocal = (await t.api("GET", "/v1/sandboxes?host=local")).body.sandboxes.map((s: { id: string }) => s.id);
    expect(onLocal).toContain(id);
    const missing = await t.api("GET", "/v1/sandboxes?host=nowhere");
    expect([missing.status, missing.body.code]).toEqual([404, "HOST_NOT_FOUND"]);
    // A host with nothing placed lists nothing (a host registered by the join token, no sandboxes).
    const joinToken = readFileSync(path.join(t.dataDir, "join-token"), "utf8").trim();
    const reg = await fetch(`${t.url}/v1/fleet/hosts/register`, {
      method: "POST",
      headers: { authorization: `Bearer ${joinToken}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "empty-1", capacity: { vcpus: 4, memory_mib: 4096, disk_gib: 10, accel: "tcg" } }),
    });
    expect(reg.status, await reg.clone().text()).toBe(201);
    expect((await t.api("GET", "/v1/sandboxes?host=empty-1")).body).toEqual({ sandboxes: [], next_cursor: null });
  });

  it("never shows the host to a team's non-admin key, nor lets it filter by host", async () => {
    expect((await t.api("POST", "/v1/teams", { name: "plain" })).status).toBe(201);
    const key = (await t.api("POST", "/v1/keys", { team: "plain" })).body.key as string;
    const as = jsonApi(t.url, () => key);
    const r = await as("POST", "/v1/sandboxes", small);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const own = r.body.id as string;
    try {
      const deadline = Date.now() + 240_000;
      while ((await as("GET", `/v1/sandboxes/${own}`)).body.status !== "RUNNING" && Date.now() < deadline) {
        await new Promise((res) => setTimeout(res, 200));
      }
      // Placed on `local` (the admin sees it there), yet the team's key sees no host.
      expect((await t.api("GET", `/v1/sandboxes/${own}`)).status).toBe(404);
      expect((await t.api("GET", "/v1/hosts")).body.hosts.find((h: any) => h.name === "local").usage.placements).toBeGreaterThan(
        0,
      );
      const got = await as("GET", `/v1/sandboxes/${own}`);
      expect(got.status).toBe(200);
      expect(got.body.status).toBe("RUNNING");
      expect("host" in got.body).toBe(false);
      const list = await as("GET", "/v1/sandboxes");
      expect(list.body.sandboxes.map((s: { id: string }) => s.id)).toEqual([own]);
      expect(list.body.sandboxes.some((s: object) => "host" in s)).toBe(false);
      const filtered = await as("GET", "/v1/sandboxes?host=local");
      expect([filtered.status, filtered.body.code]).toEqual([403, "FORBIDDEN"]);
    } finally {
      await as("DELETE", `/v1/sandboxes/${own}`);
    }
  }, 300_000);
});

describe("a VM that does not start", () => {
  let bad: RunningServer | undefined;
  const dirs: string[] = [];
  afterAll(async () => {
    await bad?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("ends ERROR with a sentence for the user, and QEMU's words in the server's log", async () => {
    // The setup's cache with a kernel QEMU refuses to load: QEMU exits as it starts.
    const real = cacheDir();
    const cache = mkdtempSync(path.join(tmpdir(), "sandtree-badkernel-"));
    const dataDir = mkdtempSync(path.join(tmpdir(), "sandtree-test-"));
    dirs.push(cache, dataDir);
    mkdirSync(path.join(cache, "kernel"));
    writeFileSync(path.join(cache, "kernel", "vmlinuz"), "not a kernel\n".repeat(64));
    copyFileSync(path.join(real, "kernel", "release"), path.join(cache, "kernel", "release"));
    symlinkSync(path.join(real, "guest"), path.join(cache, "guest"));
    symlinkSync(path.join(real, "images"), path.join(cache, "images"));
    let logged = "";
    bad = await startServer(
      { dataDir, cacheDir: cache, host: "127.0.0.1", port: 0, logger: true, network: "off", accel: "tcg" },
      { logStream: { write: (line: string) => (logged += line) } },
    );
    const key = bad.firstKey ?? "";
    const api = jsonApi(bad.url, () => key);
    const r = await api("POST", "/v1/sandboxes", small);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    let sb = r.body;
    const deadline = Date.now() + 120_000;
    while (!["ERROR", "RUNNING", "TERMINATED"].includes(sb.status) && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 200));
      sb = (await api("GET", `/v1/sandboxes/${sb.id}`)).body;
    }
    expect(sb.status).toBe("ERROR");
    expect(sb.error_reason).toBe("the VM did not start: QEMU exited while starting it (the server's log says why)");
    expect(sb.error_reason).not.toMatch(/qmp|console|exit code/i);
    const events = (await api("GET", `/v1/sandboxes/${sb.id}/logs`)).body.events.map((e: { message: string }) => e.message);
    expect(events.join("\n")).not.toMatch(/qmp/i);
    // The operator's detail: QEMU's own message, in the log line of the failure.
    const line = logged.split("\n").find((l) => l.includes("provisioning failed") && l.includes(sb.id as string)) ?? "";
    expect(line).toMatch(/VM start failed/);
    expect(line).toMatch(/kernel too old|qemu exited|QMP/i);
  }, 180_000);
});

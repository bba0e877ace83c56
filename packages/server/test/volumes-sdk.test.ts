// The SDK's volume calls against the real server (no VM): the resource, its files through the
// same Files class as a sandbox's, typed errors, and the volume's storage in usage (a sparse file
// a guest could have written makes the bytes; the metering clock is the test's).
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ConflictError, NotFoundError, QuotaExceededError, SandtreeClient, ValidationError } from "@sandtree/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../src/index.js";
import { openVolumeStore } from "../src/store/open-store.js";
import { startTestServer, type TestServer } from "./helpers.js";

const T0 = Date.UTC(2026, 10, 2, 0);
const H = 3_600_000;
const GiB = 1024 ** 3;
let t: TestServer;
let client: SandtreeClient;
let local: string;
const clock = new ManualClock(T0);

beforeAll(async () => {
  t = await startTestServer({ clock });
  client = new SandtreeClient({ apiUrl: t.url, apiKey: t.key, retry: { maxAttempts: 1 } });
  local = mkdtempSync(path.join(tmpdir(), "sandtree-vol-sdk-"));
});
afterAll(async () => {
  await t?.close();
  rmSync(local, { recursive: true, force: true });
});

describe("client.volumes", () => {
  it("creates, lists, gets, moves files both ways and deletes", async () => {
    const v = await client.volumes.create({ name: "ds", size_gb: 2, labels: { kind: "dataset" } });
    expect(v).toMatchObject({ name: "ds", status: "READY", size_gb: 2, used_bytes: 0 });
    expect((await client.volumes.list()).map((x) => x.id)).toContain(v.id);
    await client.volumes.files.write("ds", "/notes/a.txt", "hello");
    expect(await client.volumes.files.read(v.id, "/notes/a.txt", { encoding: "utf8" })).toBe("hello");
    writeFileSync(path.join(local, "in.bin"), Buffer.alloc(4096, 1));
    expect(await client.volumes.files.upload("ds", path.join(local, "in.bin"), "/bin/in.bin")).toEqual({
      path: "/bin/in.bin",
      bytes: 4096,
    });
    await client.volumes.files.download("ds", "/bin/in.bin", path.join(local, "out.bin"));
    expect(readFileSync(path.join(local, "out.bin"))).toEqual(Buffer.alloc(4096, 1));
    expect((await client.volumes.files.list("ds", "/")).entries.map((e) => e.name)).toEqual(["bin", "notes"]);
    expect((await client.volumes.files.stat("ds", "/notes/a.txt")).size).toBe(5);
    await client.volumes.files.mkdir("ds", "/empty");
    await client.volumes.files.remove("ds", "/empty");
    expect((await client.volumes.get("ds")).used_bytes).toBe(4096 + 5);
    await expect(client.volumes.files.read("ds", "/../x")).rejects.toBeInstanceOf(ValidationError);
    await expect(client.volumes.create({ name: "ds" })).rejects.toBeInstanceOf(ConflictError);
    await client.volumes.delete("ds");
    await expect(client.volumes.get("ds")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("a mounted volume's delete is a ConflictError naming the sandbox; a quota is a QuotaExceededError", async () => {
    const v = await client.volumes.create({ name: "busy" });
    const sb = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    await openVolumeStore(t.server.store).attachVolumes(sb.body.id, [
      { sandbox_id: sb.body.id, volume_id: v.id, path: "/w", read_only: false },
    ]);
    const err = await client.volumes.delete("busy").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect(err).toMatchObject({ code: "VOLUME_IN_USE", details: { sandboxes: [sb.body.id] } });
    await t.api("DELETE", `/v1/sandboxes/${sb.body.id}`);
    await expect(client.volumes.create({ name: "huge", size_gb: 16_000 })).rejects.toBeInstanceOf(QuotaExceededError);
  });

  it("a volume's bytes are metered per GiB-hour at $0.10 per GiB-month by default, shown in usage", async () => {
    clock.set(T0);
    const v = await client.volumes.create({ name: "metered", size_gb: 100 });
    // 73 GiB of apparent size (sparse: no disk) written as a guest would, measured at the next read
    // (every read walks here: a guest's write counts at the first GET measureTtlMs after the last).
    t.server.services.volumes.measureTtlMs = 0;
    const f = path.join(t.dataDir, "volumes", v.id, "data", "big");
    writeFileSync(f, "");
    truncateSync(f, 73 * GiB);
    expect((await client.volumes.get("metered")).used_bytes).toBe(73 * GiB);
    clock.set(T0 + 10 * H);
    await client.volumes.delete("metered");
    clock.set(T0 + 20 * H);
    const report = await client.usage.get({
      from: new Date(T0).toISOString(),
      to: new Date(T0 + 20 * H).toISOString(),
      group_by: "sandbox",
    });
    const line = report.lines.find((l) => l.key === v.id);
    expect(line?.volume_gib_hours).toBeCloseTo(730, 6);
    expect(line?.cost_usd).toBeCloseTo(0.1, 9);
  });
});

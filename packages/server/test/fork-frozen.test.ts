import { existsSync, readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { FakeHost } from "@sandtree/host/fake";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { startS3, type TestS3, useS3Credentials } from "../../host/test/helpers/s3-server.js";
import { bundleOpened, registerAt, serveFakeWorker } from "./fleet/fake-worker.js";
import { layerFile, settleCheckpoint, startTestServer, type TestServer } from "./helpers.js";

// Children of a fork (and restores) on the host that took the checkpoint start once it is FROZEN;
// the seal carries on behind them. The layers go to an S3 bucket that the test replaces by a
// listener that never answers: a seal then waits, FROZEN, for as long as the test wants, so a child
// that runs then started from a FROZEN checkpoint. Stopped (connections refused), a seal fails.
let restoreEnv = () => {};
let s3: TestS3;
let t: TestServer;

beforeAll(async () => {
  s3 = await startS3();
  restoreEnv = useS3Credentials();
  t = await startTestServer({ blobStore: `s3://${s3.bucket}/frozen?endpoint=${s3.endpoint}&region=us-east-1` });
});

afterAll(async () => {
  await closeHole();
  await t?.close();
  await s3?.close();
  restoreEnv();
});

let hole: net.Server | null = null;
const held = new Set<net.Socket>();

/** The bucket's port accepts connections and never answers: uploads hang. */
async function blackhole(): Promise<void> {
  await s3.stop();
  const server = net.createServer((sock) => {
    held.add(sock);
    sock.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(s3.port, "127.0.0.1", resolve));
  hole = server;
}

/** Drops the hung connections and closes the port (refused until the bucket restarts). */
async function closeHole(): Promise<void> {
  for (const sock of held) sock.destroy();
  held.clear();
  const server = hole;
  hole = null;
  if (server) await new Promise((resolve) => server.close(resolve));
}

const SMALL = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };

const run = async (id: string, command: string) => {
  const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { stdout: string; exit_code: number };
};

const settle = (cid: string) => settleCheckpoint(t, cid, 300_000);

describe("forks and restores from a FROZEN checkpoint", () => {
  it("memory children start before the seal, outlive its failure, and their own checkpoints store the lost layer", {
    timeout: 600_000,
  }, async () => {
    const p = await t.api("POST", "/v1/sandboxes", SMALL);
    const parent = p.body.id as string;
    await t.waitRunning(parent);
    await run(parent, "echo from-parent > /root/a && sync");
    // A process whose state lives only in RAM: the children have it, with its pid.
    const pid = (await run(parent, "sleep 100000 > /dev/null 2>&1 & echo $!")).stdout.trim();

    await blackhole();
    const forked = await t.api("POST", `/v1/sandboxes/${parent}/fork`, { memory: true, count: 2 });
    expect(forked.status, JSON.stringify(forked.body)).toBe(201);
    const ckId = forked.body.checkpoint_id as string;
    // The bucket is down: the checkpoint cannot be DURABLE, and the children were started anyway.
    expect((await t.api("GET", `/v1/checkpoints/${ckId}`)).body.state).toBe("FROZEN");
    const children = (forked.body.sandboxes as Array<{ id: string }>).map((s) => s.id);
    for (const c of children) {
      const sb = await t.waitRunning(c);
      expect(sb.start_path).toBe("memory");
      expect((await run(c, "cat /root/a")).stdout).toBe("from-parent\n");
      expect((await run(c, `cat /proc/${pid}/cmdline | tr '\\0' ' '`)).stdout).toBe("sleep 100000 ");
    }

    // A reset to the FROZEN checkpoint maps the same RAM image: the child is back at the fork point.
    const [first, second] = children as [string, string];
    await run(second, "rm /root/a && sync");
    const reset = await t.api("POST", `/v1/sandboxes/${second}/reset`, { checkpoint_id: ckId });
    expect(reset.status, JSON.stringify(reset.body)).toBe(200);
    expect((await run(second, "cat /root/a")).stdout).toBe("from-parent\n");
    expect((await t.api("GET", `/v1/checkpoints/${ckId}`)).body.state).toBe("FROZEN");

    // The seal cannot reach the bucket: the checkpoint fails, the children run on, on a layer kept for them.
    await closeHole();
    const failed = await settle(ckId);
    expect(failed.state).toBe("FAILED");
    expect(failed.error).toMatch(/storing the layer failed/);
    const refused = await t.api("POST", "/v1/sandboxes", { checkpoint_id: ckId });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe("CHECKPOINT_FAILED");
    await t.api("DELETE", `/v1/sandboxes/${parent}`);
    await t.server.services.checkpoints.collect();
    await run(first, "echo from-child >> /root/a && sync");
    expect((await run(first, "cat /root/a")).stdout).toBe("from-parent\nfrom-child\n");
    expect((await t.api("GET", `/v1/sandboxes/${second}`)).body.status).toBe("RUNNING");
    expect((await run(second, "md5sum /bin/busybox")).exit_code).toBe(0);

    // With the bucket back, a child's checkpoint is DURABLE only with its whole chain stored:
    // the failed ancestor's layer (still on this host) goes to the bucket with it.
    await s3.restart();
    const grand = await t.api("POST", `/v1/sandboxes/${first}/checkpoints`, {});
    expect(grand.status, JSON.stringify(grand.body)).toBe(201);
    expect((await settle(grand.body.id)).state).toBe("DURABLE");
    expect((await t.api("GET", `/v1/checkpoints/${ckId}`)).body.state).toBe("FAILED");
    const restored = await t.api("POST", "/v1/sandboxes", { checkpoint_id: grand.body.id });
    expect(restored.status, JSON.stringify(restored.body)).toBe(201);
    await t.waitRunning(restored.body.id);
    expect((await run(restored.body.id, "cat /root/a")).stdout).toBe("from-parent\nfrom-child\n");
    for (const s of [...children, restored.body.id]) await t.api("DELETE", `/v1/sandboxes/${s}`);
  });

  it("restores a FROZEN checkpoint here at once, and its seal outlives the source sandbox", { timeout: 600_000 }, async () => {
    const p = await t.api("POST", "/v1/sandboxes", SMALL);
    const parent = p.body.id as string;
    await t.waitRunning(parent);
    await run(parent, "echo kept > /root/b && sync");
    await blackhole();
    const ck = await t.api("POST", `/v1/sandboxes/${parent}/checkpoints`, {});
    expect(ck.status).toBe(201);
    expect(ck.body.state).toBe("FROZEN");
    const child = await t.api("POST", "/v1/sandboxes", { checkpoint_id: ck.body.id });
    expect(child.status, JSON.stringify(child.body)).toBe(201);
    // The source goes while the seal still waits for the bucket: a child runs from the checkpoint,
    // so it is not failed (without a child it would be: checkpoint-faults.test.ts).
    await t.api("DELETE", `/v1/sandboxes/${parent}`);
    expect((await t.api("GET", `/v1/checkpoints/${ck.body.id}`)).body.state).toBe("FROZEN");
    await closeHole();
    await s3.restart();
    const sealed = await settle(ck.body.id);
    expect(sealed.state, sealed.error).toBe("DURABLE");
    await t.waitRunning(child.body.id);
    expect((await run(child.body.id, "cat /root/b")).stdout).toBe("kept\n");
    expect(existsSync(layerFile(t.dataDir, ck.body.id))).toBe(true);
    await t.api("DELETE", `/v1/sandboxes/${child.body.id}`);
  });

  // Last: a registered worker makes this server place sandboxes as a fleet from here on.
  it("places children on another host only once DURABLE: a fork pinned there times out while the bucket hangs", {
    timeout: 300_000,
  }, async () => {
    // The earlier cases' sandboxes still hold this host's vCPUs until their VMs are gone (a DELETE
    // answers before that): once a worker joined, placement counts them, and this host has 2.
    for (let i = 0; ; i++) {
      const list = (await t.api("GET", "/v1/sandboxes?limit=1000")).body.sandboxes as Array<{ status: string }>;
      if (list.every((s) => ["TERMINATED", "ERROR", "TIMEOUT"].includes(s.status))) break;
      if (i > 600) throw new Error(`sandboxes of the earlier cases never ended: ${list.map((s) => s.status)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const token = readFileSync(path.join(t.dataDir, "join-token"), "utf8").trim();
    // A worker that joined, serving a host of its own (a fake one: no call may reach it before the layers are stored).
    const capacity = { vcpus: 64, memory_mib: 1 << 16, disk_gib: 1000, accel: "tcg" };
    const worker = await serveFakeWorker((dir) => new FakeHost({ dir }));
    onTestFinished(() => worker.close());
    const joined = { body: await worker.join(registerAt(t.url, token, "wfar", capacity), token) };
    await bundleOpened(t.server, "wfar");
    const p = await t.api("POST", "/v1/sandboxes", { ...SMALL, host: "local" });
    expect(p.status, JSON.stringify(p.body)).toBe(201);
    await t.waitRunning(p.body.id);
    await blackhole();
    const beat = await t.api(
      "POST",
      `/v1/fleet/hosts/${joined.body.host_id}/heartbeat`,
      {},
      { authorization: `Bearer ${joined.body.secret}` },
    );
    expect(beat.status).toBe(200);
    const f = await t.api("POST", `/v1/sandboxes/${p.body.id}/fork`, { host: "wfar", wait_timeout_seconds: 1 });
    expect([f.status, f.body.code], JSON.stringify(f.body)).toEqual([504, "TIMEOUT"]);
    const cks = (await t.api("GET", `/v1/sandboxes/${p.body.id}/checkpoints`)).body.checkpoints as Array<{ state: string }>;
    expect(cks.map((c) => c.state)).toEqual(["FROZEN"]);
    await closeHole();
    await s3.restart();
    await t.api("DELETE", `/v1/sandboxes/${p.body.id}`);
  });
});

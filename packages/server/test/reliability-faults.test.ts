// Faults: the data disk filling up during a checkpoint, truncated or altered layers at restore,
// and a guest that stops answering (its QEMU SIGSTOPped). The server's data dir lives on a small
// loop-mounted ext4 filesystem made for this test.
import { execFileSync } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, readSync, rmSync, statSync, truncateSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { layerFile, type TestServer } from "./helpers.js";
import { qemuPidOf, recordFigures, settleCheckpoint, sleep, startServerAt } from "./reliability/harness.js";

const AGENT_DEADLINE_MS = 6000;
let work: string;
let mnt: string;
let t: TestServer;
let id: string;
const errorLogs: string[] = [];
const stopped: number[] = [];

beforeAll(async () => {
  work = mkdtempSync(path.join(tmpdir(), "sandtree-faults-"));
  mnt = path.join(work, "mnt");
  mkdirSync(mnt);
  const img = path.join(work, "fs.img");
  execFileSync("truncate", ["-s", "300M", img]);
  execFileSync("mkfs.ext4", ["-q", "-m", "0", img]);
  execFileSync("mount", ["-o", "loop", img, mnt]);
  // Warm templates keep a RAM file per template in the data dir: off, so the small disk is ours.
  process.env.SANDTREE_WARM_TEMPLATES = "0";
  process.env.SANDTREE_AGENT_DEADLINE_MS = String(AGENT_DEADLINE_MS);
  t = await startServerAt({
    dataDir: path.join(mnt, "data"),
    keepDataDir: true,
    logStream: { write: (l: string) => (/"level":(50|60)/.test(l) ? errorLogs.push(l) : 0) },
  });
  const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
  id = r.body.id;
  await t.waitRunning(id);
});
afterAll(async () => {
  for (const pid of stopped) {
    try {
      process.kill(pid, "SIGCONT");
    } catch {}
  }
  await t?.close();
  try {
    execFileSync("umount", [mnt]);
  } catch {
    // Still busy (a run cut short): detach lazily; the loop device goes once the last file closes.
    execFileSync("umount", ["-l", mnt], { stdio: "ignore" });
  }
  rmSync(work, { recursive: true, force: true });
});

const run = async (sandbox: string, command: string) => (await t.api("POST", `/v1/sandboxes/${sandbox}/exec`, { command })).body;

/** Fills the filesystem of `dir` to the last block. */
function fill(dir: string): void {
  for (const bs of ["1M", "4k", "512"]) {
    try {
      execFileSync("dd", ["if=/dev/zero", `of=${path.join(dir, `filler-${bs}`)}`, `bs=${bs}`], { stdio: "ignore" });
    } catch {}
  }
  execFileSync("sync");
}
const freeBytes = (dir: string) =>
  Number(execFileSync("df", ["-B1", "--output=avail", dir], { encoding: "utf8" }).split("\n")[1]);

describe("data disk full", () => {
  it("fails the checkpoint with a clear error; the sandbox runs on; earlier checkpoints restore", {
    timeout: 300_000,
  }, async () => {
    await run(id, "echo before-full > /root/state && sync");
    const a = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    expect((await settleCheckpoint(t, a.body.id)).state).toBe("DURABLE");

    // 1. Almost full: the database still takes a row, the checkpoint's new overlay does not fit.
    fill(mnt);
    truncateSync(path.join(mnt, "filler-1M"), statSync(path.join(mnt, "filler-1M")).size - 128 * 1024);
    const nearlyFree = freeBytes(mnt);
    const ck = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    const cid = ck.body.details?.checkpoint_id ?? ck.body.id;
    const failed = cid ? (await t.api("GET", `/v1/checkpoints/${cid}`)).body : {};
    // 2. Full to the last block: the database cannot write either.
    fill(mnt);
    const full = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    // The sandbox still answers while the disk is full (commands that do not write to the disk).
    const alive = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "cat /root/state" });
    const health = await fetch(`${t.url}/healthz`);

    for (const f of ["filler-1M", "filler-4k", "filler-512"]) rmSync(path.join(mnt, f), { force: true });
    const aliveAfter = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "cat /root/state" });
    const after = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    const afterState = after.body.id ? (await settleCheckpoint(t, after.body.id)).state : after.body.code;
    const restored = await t.api("POST", "/v1/sandboxes", { checkpoint_id: a.body.id, memory_gb: 0.25 });
    await t.waitRunning(restored.body.id);
    const content = await run(restored.body.id, "cat /root/state");
    await t.api("DELETE", `/v1/sandboxes/${restored.body.id}`);

    recordFigures("faults", "disk-full", {
      tried:
        "300 MiB loop-mounted ext4 data dir: filled to 128 KiB free, then a checkpoint; filled to the last block, then a checkpoint and an exec",
      result:
        `nearly full: ${ck.status} ${ck.body.code}, checkpoint ${failed.state} ("${String(failed.error).slice(0, 100)}"); ` +
        `full: ${full.status} ${full.body.code}; exec while full ${alive.status}; after freeing: exec ${aliveAfter.status}, ` +
        `checkpoint ${afterState}, earlier checkpoint restored with its file`,
      figures: {
        free_bytes_nearly_full: nearlyFree,
        nearly_full_status: ck.status,
        full_status: full.status,
        exec_status_while_full: alive.status,
      },
    });
    expect(ck.status, JSON.stringify(ck.body)).toBe(409);
    expect(ck.body.code).toBe("CHECKPOINT_FAILED");
    expect(ck.body.message).toMatch(/No space left|ENOSPC/i);
    expect(failed.state).toBe("FAILED");
    expect(failed.error).toMatch(/No space left|ENOSPC/i);
    expect(full.status, JSON.stringify(full.body)).toBe(507);
    expect(full.body.code).toBe("HOST_DISK_FULL");
    expect(health.status).toBe(200);
    expect(alive.status, JSON.stringify(alive.body)).toBe(200);
    expect(alive.body.stdout).toBe("before-full\n");
    expect(aliveAfter.body.stdout).toBe("before-full\n");
    expect((await t.api("GET", `/v1/sandboxes/${id}`)).body.status).toBe("RUNNING");
    expect(afterState).toBe("DURABLE");
    expect(content.stdout).toBe("before-full\n");
  });
});

describe("damaged layers", () => {
  async function durableCheckpoint(sandbox: string): Promise<string> {
    await run(sandbox, `echo ${Date.now()} > /root/stamp && sync`);
    const c = await t.api("POST", `/v1/sandboxes/${sandbox}/checkpoints`, {});
    expect((await settleCheckpoint(t, c.body.id)).state).toBe("DURABLE");
    return c.body.id;
  }

  it("refuses a truncated layer with CHECKPOINT_CORRUPT", { timeout: 120_000 }, async () => {
    const cid = await durableCheckpoint(id);
    const file = layerFile(t.dataDir, cid);
    const size = statSync(file).size;
    truncateSync(file, Math.floor(size / 2));
    const r = await t.api("POST", "/v1/sandboxes", { checkpoint_id: cid, memory_gb: 0.25 });
    recordFigures("faults", "layer-truncated", {
      tried: `a DURABLE layer truncated from ${size} to ${Math.floor(size / 2)} bytes, then restored`,
      result: `${r.status} ${r.body.code}`,
    });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe("CHECKPOINT_CORRUPT");
  });

  it("refuses a layer altered in place after an earlier verified restore, even with its mtime put back", {
    timeout: 180_000,
  }, async () => {
    // A sandbox of its own: the truncated layer above is an ancestor of every later checkpoint of `id`.
    const own = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    await t.waitRunning(own.body.id);
    const cid = await durableCheckpoint(own.body.id);
    await t.api("DELETE", `/v1/sandboxes/${own.body.id}`);
    // A first restore verifies the hash and remembers it.
    const ok = await t.api("POST", "/v1/sandboxes", { checkpoint_id: cid, memory_gb: 0.25 });
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    await t.waitRunning(ok.body.id);
    await t.api("DELETE", `/v1/sandboxes/${ok.body.id}`);
    const file = layerFile(t.dataDir, cid);
    const st = statSync(file, { bigint: true });
    const fd = openSync(file, "r+");
    const at = Number(st.size / 2n);
    const b = Buffer.alloc(1);
    readSync(fd, b, 0, 1, at);
    b[0] = (b[0] as number) ^ 0xff;
    writeSync(fd, b, 0, 1, at);
    closeSync(fd);
    // Put the mtime back to the nanosecond (what a careless rewrite or a tampering copy could do).
    const ns = statSync(file, { bigint: true }).mtimeNs;
    const mtimeNs = st.mtimeNs;
    if (ns !== mtimeNs)
      execFileSync("touch", [
        "-m",
        "-d",
        `@${mtimeNs / 1_000_000_000n}.${String(mtimeNs % 1_000_000_000n).padStart(9, "0")}`,
        file,
      ]);
    expect(statSync(file, { bigint: true }).mtimeNs).toBe(st.mtimeNs);
    const r = await t.api("POST", "/v1/sandboxes", { checkpoint_id: cid, memory_gb: 0.25 });
    if (r.status === 201) await t.api("DELETE", `/v1/sandboxes/${r.body.id}`);
    recordFigures("faults", "layer-altered", {
      tried:
        "one byte of a verified DURABLE layer flipped in place (same size, mtime put back to the nanosecond), then restored again",
      result: `${r.status} ${r.body.code ?? r.body.status}`,
    });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe("CHECKPOINT_CORRUPT");
  });
});

describe("a guest that stops answering", () => {
  it("is detected: calls fail with a clear error within the deadline and the sandbox becomes ERROR", {
    timeout: 180_000,
  }, async () => {
    const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    const victim: string = r.body.id;
    await t.waitRunning(victim);
    expect((await run(victim, "echo hi")).stdout).toBe("hi\n");
    const pid = qemuPidOf(victim);
    stopped.push(pid);
    process.kill(pid, "SIGSTOP");
    const started = performance.now();
    // A client-side limit well past the server's deadline, so a hang fails the test instead of blocking it.
    const res = await fetch(`${t.url}/v1/sandboxes/${victim}/exec`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json" },
      body: JSON.stringify({ command: "echo never" }),
      signal: AbortSignal.timeout(AGENT_DEADLINE_MS * 5 + 30_000),
    }).catch((err: Error) => ({ status: 0, json: async () => ({ code: "CLIENT_TIMEOUT", message: err.message }) }));
    const body = (await res.json()) as { code: string; message: string };
    const answeredMs = Math.round(performance.now() - started);
    let sb = (await t.api("GET", `/v1/sandboxes/${victim}`)).body;
    for (let i = 0; i < 50 && sb.status === "RUNNING"; i++) {
      await sleep(200);
      sb = (await t.api("GET", `/v1/sandboxes/${victim}`)).body;
    }
    const next = await t.api("POST", `/v1/sandboxes/${victim}/exec`, { command: "true" });
    // The neighbour (the first sandbox) is not affected.
    const neighbour = await run(id, "echo ok");
    try {
      process.kill(pid, "SIGCONT");
    } catch {}
    recordFigures("faults", "guest-stopped", {
      tried: `the sandbox's QEMU SIGSTOPped, then an exec (agent deadline ${AGENT_DEADLINE_MS} ms via SANDTREE_AGENT_DEADLINE_MS)`,
      result: `exec answered ${res.status} ${body.code} after ${answeredMs} ms; sandbox ${sb.status} ("${sb.error_reason}"); next exec ${next.status} ${next.body.code}`,
      figures: { answered_ms: answeredMs },
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(body.code).toBe("GUEST_ERROR");
    expect(answeredMs).toBeLessThan(AGENT_DEADLINE_MS * 3 + 5000);
    expect(sb.status).toBe("ERROR");
    expect(sb.error_reason).toMatch(/stopped answering/);
    expect(next.status).toBe(409);
    expect(next.body.code).toBe("SANDBOX_NOT_RUNNING");
    expect(neighbour.stdout).toBe("ok\n");
    expect(errorLogs.filter((l) => l.includes("unhandled error"))).toEqual([]);
  });
});

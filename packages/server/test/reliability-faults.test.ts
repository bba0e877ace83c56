// Faults: the data disk filling up during a checkpoint, truncated or altered layers at restore,
// and a guest that stops answering (its QEMU SIGSTOPped). The server's data dir lives on a small
// loop-mounted ext4 filesystem made for this test.
import { execFileSync } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, readSync, rmSync, statSync, truncateSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { layerFile, type TestServer } from "./helpers.js";
import {
  eventually,
  killQemusMatching,
  qemuPidOf,
  recordFigures,
  runRootOf,
  settleCheckpoint,
  sleep,
  startServerAt,
  within,
} from "./reliability/harness.js";

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
}, 300_000);

// Order matters: no QEMU may outlive the file (earlier runs left some behind), and the loop
// mount goes only once nothing of ours uses it. Each step runs even when an earlier one failed.
afterAll(async () => {
  for (const pid of stopped) {
    try {
      process.kill(pid, "SIGCONT");
    } catch {}
  }
  for (const f of ["filler-1M", "filler-4k", "filler-512"]) if (mnt) rmSync(path.join(mnt, f), { force: true });
  if (t)
    await within(
      t.close().then(() => true),
      60_000,
      false,
    ).catch(() => false);
  if (mnt) await killQemusMatching([`${mnt}/`, `${runRootOf(path.join(mnt, "data"))}/`]);
  if (!mnt) return;
  try {
    execFileSync("umount", [mnt]);
  } catch {
    // Still busy: detach lazily; the loop device goes once the last file closes.
    execFileSync("umount", ["-l", mnt], { stdio: "ignore" });
  }
  rmSync(work, { recursive: true, force: true });
}, 120_000);

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
/** Fills `dir`, then gives `bytes` back. */
function fillLeaving(dir: string, bytes: number): void {
  fill(dir);
  const f = path.join(dir, "filler-1M");
  truncateSync(f, Math.max(0, statSync(f).size - bytes));
}
function unfill(dir: string): void {
  for (const f of ["filler-1M", "filler-4k", "filler-512"]) rmSync(path.join(dir, f), { force: true });
}
const freeBytes = (dir: string) =>
  Number(execFileSync("df", ["-B1", "--output=avail", dir], { encoding: "utf8" }).split("\n")[1]);

/**
 * An exec that may be caught by a VM QEMU paused on the full disk: if it has no answer after
 * `whileFullMs`, `free()` runs and the exec gets `afterMs` more (a paused VM runs on once space is back). Never hangs.
 */
async function execAcross(sandbox: string, command: string, whileFullMs: number, free: () => void, afterMs = 90_000) {
  const p = t
    .api("POST", `/v1/sandboxes/${sandbox}/exec`, { command })
    .catch((e: Error) => ({ status: 0, body: { code: e.message } }));
  const early = await within(p, whileFullMs, null);
  if (!early) free();
  const r = early ?? (await within(p, afterMs, { status: 0, body: { code: "NO_ANSWER" } }));
  return { ...r, answeredWhileFull: early !== null };
}
/** Waits until an exec answers again (a VM QEMU paused on the full disk runs on within seconds once freed). */
async function untilAnswering(sandbox: string): Promise<void> {
  await eventually(
    async () => (await t.api("POST", `/v1/sandboxes/${sandbox}/exec`, { command: "true" })).status === 200,
    90_000,
    500,
  );
}
const events = async (sandbox: string): Promise<string> =>
  ((await t.api("GET", `/v1/sandboxes/${sandbox}/logs`)).body.events ?? []).map((e: { message: string }) => e.message).join("\n");

describe("data disk full", () => {
  it("fails checkpoints with HOST_DISK_FULL; a VM QEMU paused on ENOSPC is reported and runs on once space is back", {
    timeout: 420_000,
  }, async () => {
    // Read once right away: later reads then leave atime alone (relatime), so the steps below
    // do not make the guest write by themselves.
    await run(id, "echo before-full > /root/state && cat /root/state >/dev/null && sync");
    const a = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    expect((await settleCheckpoint(t, a.body.id)).state).toBe("DURABLE");

    // 1. Almost full: the database still takes a row, the checkpoint's new overlay does not fit.
    fillLeaving(mnt, 128 * 1024);
    const nearlyFree = freeBytes(mnt);
    const ck = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    const cid = ck.body.details?.checkpoint_id ?? ck.body.id;
    const failed = cid ? (await t.api("GET", `/v1/checkpoints/${cid}`)).body : {};
    // 2. Full to the last block: the database cannot write either.
    fill(mnt);
    const full = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    const health = await fetch(`${t.url}/healthz`);
    // The sandbox answers a read while the disk is full, or (should the guest have written
    // something meanwhile) says at once that it is held on the full disk, and answers once freed.
    const alive = await execAcross(id, "cat /root/state", 20_000, () => unfill(mnt));
    unfill(mnt);
    await untilAnswering(id);

    // 3. The guest writes while the host disk is full: QEMU pauses the VM on ENOSPC. The
    // checkpoint's freeze flushes those writes, so it runs into the pause and must fail at once.
    fillLeaving(mnt, 4 * 1024 * 1024);
    // 16 MiB stays below the guest's background writeback threshold, so the data waits in its page cache.
    const dirty = await execAcross(id, "dd if=/dev/urandom of=/root/big bs=1M count=16 2>/dev/null; echo written", 30_000, () =>
      unfill(mnt),
    );
    const t0 = performance.now();
    const paused = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    const pausedCheckpointMs = Math.round(performance.now() - t0);
    const pausedCid = paused.body.details?.checkpoint_id;
    // Whatever the checkpoint hit first, a sync makes the guest write: the pause must be reported.
    const synced = await execAcross(id, "sync; ls -l /root/big | awk '{print $5}'", 20_000, () => unfill(mnt));
    unfill(mnt);
    await untilAnswering(id);
    // The FAILED state may have had to wait for the database to take the write, too.
    let pausedRow: any = {};
    if (pausedCid)
      await eventually(async () => {
        pausedRow = (await t.api("GET", `/v1/checkpoints/${pausedCid}`)).body;
        return pausedRow.state !== "PENDING";
      }, 30_000);
    const ev = await events(id);
    const sbAfter = (await t.api("GET", `/v1/sandboxes/${id}`)).body;

    const after = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    const afterState = after.body.id ? (await settleCheckpoint(t, after.body.id)).state : after.body.code;
    const restored = await t.api("POST", "/v1/sandboxes", { checkpoint_id: a.body.id, memory_gb: 0.25 });
    await t.waitRunning(restored.body.id);
    const content = await run(restored.body.id, "cat /root/state");
    await t.api("DELETE", `/v1/sandboxes/${restored.body.id}`);

    recordFigures("faults", "disk-full", {
      tried:
        "300 MiB loop-mounted ext4 data dir: filled to 128 KiB free, then a checkpoint; filled to the last block, then a " +
        "checkpoint and an exec; 4 MiB free while the guest holds 16 MiB of unwritten data, then a checkpoint and a sync",
      result:
        `nearly full: ${ck.status} ${ck.body.code}, ${cid ? `checkpoint ${failed.state}` : "VM already held on the full disk"}; full: ${full.status} ${full.body.code}; ` +
        `exec while full ${alive.status}${alive.answeredWhileFull ? "" : " (after space was freed)"}; guest writing into a full disk: ` +
        `checkpoint ${paused.status} ${paused.body.code} ("${String(pausedRow.error ?? paused.body.message).slice(0, 140)}"), ` +
        `VM pause reported in the sandbox's events, sync ${synced.status}${synced.answeredWhileFull ? "" : " once space was freed"}; ` +
        `after freeing: sandbox ${sbAfter.status}, checkpoint ${afterState}, earlier checkpoint restored with its file`,
      figures: {
        free_bytes_nearly_full: nearlyFree,
        nearly_full_status: ck.status,
        full_status: full.status,
        exec_status_while_full: alive.status,
        checkpoint_into_paused_vm_ms: pausedCheckpointMs,
      },
    });
    expect(ck.status, JSON.stringify(ck.body)).toBe(507);
    expect(ck.body.code).toBe("HOST_DISK_FULL");
    expect(ck.body.message).toMatch(/No space left|ENOSPC/i);
    // Either the overlay did not fit (a FAILED row says why) or the guest had already written and
    // QEMU holds the VM (refused before any row).
    if (cid) {
      expect(failed.state).toBe("FAILED");
      expect(failed.error).toMatch(/No space left|ENOSPC/i);
    } else expect(ck.body.message).toMatch(/is held: QEMU paused the VM/);
    expect(full.status, JSON.stringify(full.body)).toBe(507);
    expect(full.body.code).toBe("HOST_DISK_FULL");
    expect(health.status).toBe(200);
    if (alive.status === 200) expect(alive.body.stdout).toBe("before-full\n");
    else expect(alive.body.code, JSON.stringify(alive)).toBe("HOST_DISK_FULL");
    // The write runs, or (the guest's background writeback hit the full disk first) the VM is
    // already held and the exec is refused at once, like `alive` above.
    if (dirty.status === 200) expect(dirty.body.stdout).toBe("written\n");
    else expect(dirty.body.code, JSON.stringify(dirty)).toBe("HOST_DISK_FULL");
    if (dirty.answeredWhileFull) {
      expect(paused.status, JSON.stringify(paused.body)).toBe(507);
      expect(paused.body.code).toBe("HOST_DISK_FULL");
      if (pausedCid) expect(pausedRow.state).toBe("FAILED");
    }
    // Recorded when it happened, or (the database could not write either) once it ran again.
    expect(ev).toMatch(/paused(?: from \S+)?: QEMU paused the VM on a disk write error: No space left/);
    expect(ev).toMatch(/running again after the host disk error/);
    if (synced.status === 200 && dirty.status === 200) expect(synced.body.stdout).toBe(`${16 * 1024 * 1024}\n`);
    else if (synced.status !== 200) expect(synced.body.code, JSON.stringify(synced)).toBe("HOST_DISK_FULL");
    expect(sbAfter.status).toBe("RUNNING");
    // Nothing lost: the state file, and the 16 MiB when the write was let in.
    expect((await run(id, "cat /root/state; ls -l /root/big 2>/dev/null | awk '{print $5}'")).stdout).toBe(
      dirty.status === 200 ? `before-full\n${16 * 1024 * 1024}\n` : "before-full\n",
    );
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
  it("is not confused with a guest held on purpose: a pause longer than the deadline and checkpoints leave it RUNNING", {
    timeout: 120_000,
  }, async () => {
    expect((await t.api("POST", `/v1/sandboxes/${id}/pause`)).body.status).toBe("PAUSED");
    await sleep(AGENT_DEADLINE_MS * 1.5);
    expect((await t.api("POST", `/v1/sandboxes/${id}/resume`)).body.status).toBe("RUNNING");
    const disk = await t.api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    expect((await settleCheckpoint(t, disk.body.id)).state).toBe("DURABLE");
    // Two deadlines later the watchdog has pinged across all of it.
    await sleep(AGENT_DEADLINE_MS * 2);
    const sb = (await t.api("GET", `/v1/sandboxes/${id}`)).body;
    expect(sb.status, sb.error_reason).toBe("RUNNING");
    expect((await run(id, "echo still")).stdout).toBe("still\n");
  });

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
    expect(sb.status).toBe("ERROR");
    expect(sb.error_reason).toMatch(/stopped answering/);
    expect(next.status).toBe(409);
    expect(next.body.code).toBe("SANDBOX_NOT_RUNNING");
    expect(neighbour.stdout).toBe("ok\n");
    expect(errorLogs.filter((l) => l.includes("unhandled error"))).toEqual([]);
  });
});

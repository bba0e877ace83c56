// Restart safety: the server runs as a child process (the built CLI's `serve`) so it can be
// killed with SIGKILL at any moment; after a restart every sandbox is RUNNING and usable or
// ERROR with a reason, and nothing of a lost sandbox (QEMU, disk layers, sockets) is left.
// Needs `npm run build` (scripts/test.sh runs `tsc -b` first).
import { type ChildProcess, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cpuTicks, jsonApi, killQemusOf, pollFor, qemuPidsFor, spawnServe, stopChildProcess } from "./helpers.js";

const BODY = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let dataDir: string;
let runRoot: string;
let child: ChildProcess | null = null;
let output = "";
let url = "";
let key = "";
const created: string[] = [];

/**
 * Starts `sandtree serve` on a free port; resolves with its URL once it listens. The server
 * listens before the VMs it finds are adopted: adoption goes on in the background.
 */
async function startChild(env: Record<string, string> = {}): Promise<void> {
  output = "";
  const s = await spawnServe(dataDir, { env, onOutput: (d) => (output += d) });
  child = s.proc;
  url = s.url;
  key ||= s.key;
}

async function killChild(): Promise<void> {
  const proc = child;
  child = null;
  await stopChildProcess(proc, "SIGKILL");
}

/** The API of the server running now (its URL and key change with each start). */
const api = (method: string, p: string, body?: unknown) => jsonApi(url, () => key)(method, p, body);

/**
 * Waits until the sandbox's adoption after a restart settled: a file stat is a call into the VM,
 * which the server holds until then (any answer will do: 200, or 409 for a PAUSED or lost one).
 */
async function adopted(id: string): Promise<void> {
  const r = await api("GET", `/v1/sandboxes/${id}/files/stat?path=/`);
  expect([200, 409], JSON.stringify(r.body)).toContain(r.status);
}

async function create(): Promise<string> {
  const r = await api("POST", "/v1/sandboxes", BODY);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  created.push(r.body.id);
  return r.body.id as string;
}

const waitFor = <T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 240_000) =>
  pollFor(what, fn, timeoutMs, 20);

async function waitRunning(id: string): Promise<void> {
  await waitFor(`${id} RUNNING`, async () => {
    const sb = (await api("GET", `/v1/sandboxes/${id}`)).body;
    if (["ERROR", "TERMINATED", "TIMEOUT"].includes(sb.status)) throw new Error(`${id} ended ${sb.status}: ${sb.error_reason}`);
    return sb.status === "RUNNING" ? true : undefined;
  });
}

/** The sandbox's status straight from the database (readable while the server is dead or busy). */
function dbStatus(id: string): string | undefined {
  const db = new Database(path.join(dataDir, "sandtree.db"), { readonly: true, fileMustExist: true });
  try {
    return (db.prepare("SELECT status FROM sandboxes WHERE id = ?").get(id) as { status: string } | undefined)?.status;
  } finally {
    db.close();
  }
}

/** Ids of a sandbox's checkpoint rows, straight from the database. */
function checkpointIdsOf(id: string): string[] {
  const db = new Database(path.join(dataDir, "sandtree.db"), { readonly: true, fileMustExist: true });
  try {
    return (db.prepare("SELECT id FROM checkpoints WHERE sandbox_id = ?").all(id) as Array<{ id: string }>).map((r) => r.id);
  } finally {
    db.close();
  }
}

async function exec(id: string, command: string): Promise<any> {
  const r = await api("POST", `/v1/sandboxes/${id}/exec`, { command });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

/** While the server is down: stops a VM's CPUs over its QMP socket, as a crash mid-pause would leave it. */
async function qmpStop(id: string): Promise<void> {
  const sock = net.connect(path.join(runRoot, `sandtree-${id}`, "qmp.sock"));
  let buf = "";
  const replies: any[] = [];
  sock.setEncoding("utf8").on("data", (d: string) => {
    buf += d;
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line) replies.push(JSON.parse(line));
    }
  });
  const returns = (n: number) =>
    waitFor("QMP reply", () => (replies.filter((r) => "return" in r).length >= n ? true : undefined), 10_000);
  await waitFor("QMP greeting", () => (replies.some((r) => "QMP" in r) ? true : undefined), 10_000);
  sock.write(`${JSON.stringify({ execute: "qmp_capabilities" })}\n`);
  await returns(1);
  sock.write(`${JSON.stringify({ execute: "stop" })}\n`);
  await returns(2);
  sock.destroy();
}

/** Nothing of the sandbox is left: no QEMU, no disk layer, no socket directory. */
async function expectGone(id: string): Promise<void> {
  // SIGKILL is delivered at once, but the process disappears only when reaped.
  await waitFor(`QEMU of ${id} gone`, () => (qemuPidsFor([id]).length === 0 ? true : undefined), 5000).catch(() => {});
  expect(qemuPidsFor([id])).toEqual([]);
  // The disk and run directory go after the status is ERROR (the host removes them, asked by name).
  const layers = path.join(dataDir, "layers");
  const disks = () => (existsSync(layers) ? readdirSync(layers).filter((f) => f.startsWith(`live-${id}-`)) : []);
  const runDir = path.join(runRoot, `sandtree-${id}`);
  await waitFor(`files of ${id} gone`, () => (disks().length === 0 && !existsSync(runDir) ? true : undefined), 5000).catch(
    () => {},
  );
  expect(disks()).toEqual([]);
  expect(existsSync(runDir)).toBe(false);
}

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), "sandtree-restart-"));
  // Mirrors the server's runRootFor(): the short socket directory of this data dir.
  runRoot = path.join(tmpdir(), `sandtree-${createHash("sha256").update(path.resolve(dataDir)).digest("hex").slice(0, 10)}`);
  await startChild();
});

afterAll(async () => {
  await killChild();
  // Whatever happened, no QEMU of this test survives it.
  killQemusOf(runRoot, created);
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(runRoot, { recursive: true, force: true });
});

describe("kill -9 of the server and a restart", () => {
  let a = "";
  const checkpoints: string[] = [];

  it("adopts an idle RUNNING sandbox: files, exec and disk snapshots keep working", { timeout: 400_000 }, async () => {
    a = await create();
    await waitRunning(a);
    expect((await exec(a, "echo before > /root/one")).exit_code).toBe(0);
    // A checkpoint before the crash moves the active disk to a new node; the adopted VM must know it.
    const ck = await api("POST", `/v1/sandboxes/${a}/checkpoints`, {});
    expect(ck.status, JSON.stringify(ck.body)).toBe(201);
    checkpoints.push(ck.body.id);
    await waitFor("checkpoint DURABLE", async () =>
      (await api("GET", `/v1/checkpoints/${ck.body.id}`)).body.state === "DURABLE" ? true : undefined,
    );
    expect((await exec(a, "echo after > /root/two")).exit_code).toBe(0);
    const pidBefore = qemuPidsFor([a])[0]?.split(" ")[0];

    await killChild();
    expect(qemuPidsFor([a]).length).toBe(1); // QEMU outlives the server
    await startChild();

    const sb = (await api("GET", `/v1/sandboxes/${a}`)).body;
    expect(sb.status).toBe("RUNNING");
    expect(qemuPidsFor([a])[0]?.split(" ")[0]).toBe(pidBefore);
    expect((await exec(a, "cat /root/one /root/two")).stdout).toBe("before\nafter\n");
    const ck2 = await api("POST", `/v1/sandboxes/${a}/checkpoints`, {});
    expect(ck2.status, JSON.stringify(ck2.body)).toBe(201);
    checkpoints.push(ck2.body.id);
    await waitFor("second checkpoint DURABLE", async () =>
      (await api("GET", `/v1/checkpoints/${ck2.body.id}`)).body.state === "DURABLE" ? true : undefined,
    );
    expect((await exec(a, "echo third > /root/three && cat /root/three")).stdout).toBe("third\n");
    const logs = (await api("GET", `/v1/sandboxes/${a}/logs`)).body;
    expect(logs.events.map((e: { message: string }) => e.message).join("\n")).toContain("adopted after a server restart");
  });

  it("kill -9 during a checkpoint's upload and during a fork: every checkpoint ends DURABLE and restorable, or FAILED with a reason", {
    timeout: 400_000,
  }, async () => {
    // Some megabytes in the layer, so sealing (fsync + sha256) is still running when the server dies.
    await exec(a, "dd if=/dev/urandom of=/root/blob bs=1M count=32 2>/dev/null; md5sum /root/blob > /root/blob.md5; sync");
    const ck = await api("POST", `/v1/sandboxes/${a}/checkpoints`, {});
    expect(ck.status, JSON.stringify(ck.body)).toBe(201);
    const stateAtKill = ck.body.state;
    await killChild();
    await startChild();
    // A FROZEN layer is complete: the restart seals it again, and it becomes DURABLE.
    const sealed = await waitFor("the interrupted checkpoint settles", async () => {
      const c = (await api("GET", `/v1/checkpoints/${ck.body.id}`)).body;
      return ["DURABLE", "FAILED"].includes(c.state) ? c : undefined;
    });
    expect(sealed.state, `${stateAtKill} at the kill: ${JSON.stringify(sealed)}`).toBe("DURABLE");

    // A fork: its checkpoint, its wait for DURABLE and the child's provisioning; killed once its
    // checkpoint row exists.
    const before = checkpointIdsOf(a);
    const fork = api("POST", `/v1/sandboxes/${a}/fork`, {}).catch((e: Error) => e);
    await waitFor("the fork's checkpoint row", () => (checkpointIdsOf(a).length > before.length ? true : undefined), 60_000);
    await killChild();
    await fork;
    await startChild();

    const cks = (await api("GET", `/v1/sandboxes/${a}/checkpoints`)).body.checkpoints as Array<{
      id: string;
      state: string;
      error: string | null;
      created_at: string;
    }>;
    checkpoints.push(...cks.map((c) => c.id).filter((id) => !checkpoints.includes(id)));
    for (const c of cks) {
      expect(["DURABLE", "FAILED"], JSON.stringify(c)).toContain(c.state);
      if (c.state === "FAILED") expect(c.error).toBeTruthy();
    }
    // Children the fork may have started: RUNNING, or ERROR with a reason; never left half-made.
    const children = (
      (await api("GET", "/v1/sandboxes")).body.sandboxes as Array<{ id: string; status: string; error_reason: string | null }>
    ).filter((sb) => sb.id !== a && !created.includes(sb.id));
    for (const sb of children) {
      created.push(sb.id);
      expect(["RUNNING", "ERROR", "TERMINATED"], JSON.stringify(sb)).toContain(sb.status);
      if (sb.status === "ERROR") expect(sb.error_reason).toBeTruthy();
      await api("DELETE", `/v1/sandboxes/${sb.id}`);
      await expectGone(sb.id);
    }
    // The newest DURABLE checkpoint (the upload's, or the fork's on top of it) restores, verifying
    // every layer of its chain, and holds the file written before both.
    const durable = cks.filter((c) => c.state === "DURABLE").sort((x, y) => y.created_at.localeCompare(x.created_at));
    expect(durable.map((c) => c.id)).toContain(ck.body.id);
    const r = await api("POST", "/v1/sandboxes", { checkpoint_id: durable[0]?.id, memory_gb: 0.25 });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    created.push(r.body.id);
    try {
      await waitRunning(r.body.id);
      expect((await exec(r.body.id, "cat /root/one; md5sum -c /root/blob.md5 >/dev/null && echo intact")).stdout).toBe(
        "before\nintact\n",
      );
    } finally {
      await api("DELETE", `/v1/sandboxes/${r.body.id}`);
    }
    await expectGone(r.body.id);
    expect((await exec(a, "cat /root/one")).stdout).toBe("before\n");
  });

  it("keeps a sandbox usable when the server dies during a long exec", { timeout: 300_000 }, async () => {
    const long = api("POST", `/v1/sandboxes/${a}/exec`, { command: "sleep 30; echo late" }).catch((e: Error) => e);
    await sleep(1500);
    await killChild();
    expect(await long).toBeInstanceOf(Error); // the client saw the connection drop
    await startChild();
    expect((await api("GET", `/v1/sandboxes/${a}`)).body.status).toBe("RUNNING");
    const r = await exec(a, "echo ok; cat /root/one");
    expect(r.stdout).toBe("ok\nbefore\n");
    expect(r.exit_code).toBe(0);
  });

  it("adopts a PAUSED sandbox still paused, and runs on a RUNNING one whose VM it found stopped", {
    timeout: 300_000,
  }, async () => {
    const job = await api("POST", `/v1/sandboxes/${a}/jobs`, {
      command: "i=0; while true; do i=$((i+1)); echo $i > /root/count; sleep 0.2; done",
    });
    expect(job.status, JSON.stringify(job.body)).toBe(201);
    await waitFor(
      "the counter",
      async () => (Number((await exec(a, "cat /root/count 2>/dev/null || echo 0")).stdout) > 2 ? true : undefined),
      60_000,
    );
    expect((await api("POST", `/v1/sandboxes/${a}/pause`)).body.status).toBe("PAUSED");
    const pid = Number.parseInt(qemuPidsFor([a])[0] ?? "", 10);

    await killChild();
    await startChild();
    // Its last status while it is being adopted, and after.
    expect((await api("GET", `/v1/sandboxes/${a}`)).body.status).toBe("PAUSED");
    await adopted(a);
    const sb = (await api("GET", `/v1/sandboxes/${a}`)).body;
    expect(sb.status, sb.error_reason).toBe("PAUSED");
    expect(Number.parseInt(qemuPidsFor([a])[0] ?? "", 10)).toBe(pid);
    const events = (await api("GET", `/v1/sandboxes/${a}/logs`)).body.events.map((e: { message: string }) => e.message);
    expect(events.join("\n")).toContain("its VM was paused");
    // Stopped again after the handshake: under TCG a stopped VM's QEMU does almost nothing.
    const before = cpuTicks(pid);
    await sleep(3000);
    expect(cpuTicks(pid) - before).toBeLessThan(15);
    expect((await api("POST", `/v1/sandboxes/${a}/exec`, { command: "true" })).status).toBe(409);
    expect((await api("POST", `/v1/sandboxes/${a}/resume`)).body.status).toBe("RUNNING");
    const c1 = Number((await exec(a, "cat /root/count")).stdout);
    await waitFor(
      "the counter going on",
      async () => (Number((await exec(a, "cat /root/count")).stdout) > c1 ? true : undefined),
      30_000,
    );

    // QEMU stopped behind the database's back (a crash between QMP stop and the PAUSED row, or
    // during a memory save): the RUNNING sandbox is continued, not lost.
    await killChild();
    await qmpStop(a);
    await startChild();
    expect((await api("GET", `/v1/sandboxes/${a}`)).body.status).toBe("RUNNING");
    const c2 = Number((await exec(a, "cat /root/count")).stdout);
    await waitFor(
      "the counter after adoption",
      async () => (Number((await exec(a, "cat /root/count")).stdout) > c2 ? true : undefined),
      30_000,
    );
    expect((await api("POST", `/v1/sandboxes/${a}/jobs/${job.body.job_id}/kill`, {})).status).toBe(200);
  });

  it("marks sandboxes caught provisioning ERROR and removes their QEMU, layers and sockets", { timeout: 300_000 }, async () => {
    const booting = await create();
    // Its QEMU is started but the guest has not answered yet.
    await waitFor(`QEMU of ${booting}`, () => (qemuPidsFor([booting]).length > 0 ? true : undefined), 60_000);
    expect(dbStatus(booting)).toBe("PROVISIONING");
    const fresh = await create();
    await killChild();
    await startChild();

    for (const id of [booting, fresh]) {
      const sb = (await api("GET", `/v1/sandboxes/${id}`)).body;
      expect(sb.status).toBe("ERROR");
      expect(sb.error_reason).toContain("the server restarted while provisioning");
      expect(sb.error_code).toBe("RESTART_LOST");
      await expectGone(id);
    }
    expect((await api("GET", `/v1/sandboxes/${a}`)).body.status).toBe("RUNNING");
  });

  it("finishes a delete the crash interrupted: TERMINATED, no QEMU left", { timeout: 300_000 }, async () => {
    const d = await create();
    await waitRunning(d);
    const del = api("DELETE", `/v1/sandboxes/${d}`).catch((e: Error) => e);
    // Kill as soon as the delete is recorded, while the VM is being stopped.
    await waitFor("TERMINATED in the database", () => (dbStatus(d) === "TERMINATED" ? true : undefined), 30_000);
    await killChild();
    await del;
    await startChild();
    expect(["TERMINATED", "ERROR"]).toContain((await api("GET", `/v1/sandboxes/${d}`)).body.status);
    await expectGone(d);
  });

  it("never leaves a VM running when deletes race creates", { timeout: 400_000 }, async () => {
    const ids: string[] = [];
    for (const delayMs of [0, 300, 1500]) {
      const round = await Promise.all(
        Array.from({ length: 5 }, async () => {
          const id = await create();
          if (delayMs) await sleep(delayMs);
          const r = await api("DELETE", `/v1/sandboxes/${id}`);
          expect(r.status).toBe(200);
          expect(r.body.status).toBe("TERMINATED");
          return id;
        }),
      );
      ids.push(...round);
    }
    expect(qemuPidsFor(ids)).toEqual([]);
    // Nothing starts late either.
    await sleep(3000);
    expect(qemuPidsFor(ids)).toEqual([]);
    for (const id of ids) {
      expect((await api("GET", `/v1/sandboxes/${id}`)).body.status).toBe("TERMINATED");
      await expectGone(id);
    }
  });

  it("marks ERROR what cannot be adopted, and supervises what was", { timeout: 400_000 }, async () => {
    const [hung, dead, adopted2] = [await create(), await create(), await create()];
    await Promise.all([waitRunning(hung), waitRunning(dead), waitRunning(adopted2)]);
    const pidOf = (id: string) => Number.parseInt(qemuPidsFor([id])[0] ?? "", 10);
    const hungPid = pidOf(hung);
    await killChild();
    // While the server is down: one guest stops answering (its whole QEMU is stopped), one QEMU dies.
    process.kill(hungPid, "SIGSTOP");
    process.kill(pidOf(dead), "SIGKILL");
    try {
      // A long adoption deadline: the frozen VM is still being adopted while the API is used.
      await startChild({ SANDTREE_ADOPT_DEADLINE_MS: "20000" });
      // The API answers at once; the sandbox being adopted shows its last known status.
      expect((await api("GET", `/v1/sandboxes/${hung}`)).body.status).toBe("RUNNING");
      expect((await api("GET", "/v1/sandboxes")).status).toBe(200);
      // The other VMs are adopted meanwhile (a call into one waits only for its own adoption).
      expect((await exec(adopted2, "echo up")).stdout).toBe("up\n");
      expect((await exec(a, "cat /root/one")).stdout).toBe("before\n");
      const deadSb = (await api("GET", `/v1/sandboxes/${dead}`)).body;
      expect(deadSb.status).toBe("ERROR");
      expect(deadSb.error_reason).toContain("VM was gone");
      expect(deadSb.error_code).toBe("RESTART_LOST");
      await expectGone(dead);
      // A call into the frozen one waits for its adoption, which gives up at the deadline.
      const r = await api("POST", `/v1/sandboxes/${hung}/exec`, { command: "true" });
      expect(r.status, JSON.stringify(r.body)).toBe(409);
      const hungSb = (await api("GET", `/v1/sandboxes/${hung}`)).body;
      expect(hungSb.status).toBe("ERROR");
      expect(hungSb.error_reason).toContain("did not answer");
      await expectGone(hung);
    } finally {
      try {
        process.kill(hungPid, "SIGCONT");
      } catch {}
    }
    // The adopted VM is supervised like one this process started.
    expect((await api("GET", `/v1/sandboxes/${adopted2}`)).body.status).toBe("RUNNING");
    process.kill(pidOf(adopted2), "SIGKILL");
    const sb = await waitFor(
      "ERROR after QEMU died",
      async () => {
        const b = (await api("GET", `/v1/sandboxes/${adopted2}`)).body;
        return b.status === "ERROR" ? b : undefined;
      },
      10_000,
    );
    expect(sb.error_reason).toContain("qemu exited unexpectedly");
    await expectGone(adopted2);
    expect((await api("GET", `/v1/sandboxes/${a}`)).body.status).toBe("RUNNING");
  });

  it("prunes stale warm templates at start and keeps the current ones", { timeout: 300_000 }, async () => {
    const templates = path.join(dataDir, "templates");
    const built = () => readdirSync(templates).filter((k) => existsSync(path.join(templates, k, "template.json")));
    // Kills above may have cut template builds short (those were pruned): a create starts one.
    const w = await create();
    await waitRunning(w);
    await waitFor("a warm template", () => (built().length > 0 ? true : undefined), 120_000);
    const current = built();
    // A template an older guest agent left behind, as an upgrade would (with an image
    // template's disk in layers/), and a build a crash cut short.
    const meta = JSON.parse(readFileSync(path.join(templates, current[0]!, "template.json"), "utf8"));
    const stale = "aaaaaaaaaaaaaaaaaaaaaaaa";
    const half = "bbbbbbbbbbbbbbbbbbbbbbbb";
    mkdirSync(path.join(templates, stale));
    mkdirSync(path.join(templates, half));
    writeFileSync(
      path.join(templates, stale, "template.json"),
      JSON.stringify({
        ...meta,
        key: stale,
        diskName: `tmpl-${stale}.qcow2`,
        inputs: { ...meta.inputs, initramfs: path.join(dataDir, "old-initramfs") },
      }),
    );
    writeFileSync(path.join(templates, stale, "ram"), Buffer.alloc(1 << 20, 1));
    for (const k of [stale, half])
      execFileSync("qemu-img", ["create", "-q", "-f", "qcow2", path.join(dataDir, "layers", `tmpl-${k}.qcow2`), "16M"]);
    await killChild();
    await startChild();
    for (const k of [stale, half]) {
      expect(existsSync(path.join(templates, k))).toBe(false);
      expect(existsSync(path.join(dataDir, "layers", `tmpl-${k}.qcow2`))).toBe(false);
    }
    for (const k of current) {
      const m = JSON.parse(readFileSync(path.join(templates, k, "template.json"), "utf8"));
      if (m.diskName) expect(existsSync(path.join(dataDir, "layers", m.diskName))).toBe(true);
    }
    expect((await exec(a, "cat /root/one")).stdout).toBe("before\n");
    const warm = await create();
    await waitRunning(warm);
    expect((await api("GET", `/v1/sandboxes/${warm}`)).body.start_path).toBe("warm");
    for (const id of [w, warm]) expect((await api("DELETE", `/v1/sandboxes/${id}`)).status).toBe(200);
  });

  it("stops cleanly at the end", { timeout: 120_000 }, async () => {
    expect((await api("DELETE", `/v1/sandboxes/${a}`)).body.status).toBe("TERMINATED");
    // The checkpoints' layers outlive the sandbox until the checkpoints are deleted.
    for (const id of checkpoints) expect((await api("DELETE", `/v1/checkpoints/${id}`)).status).toBe(200);
    await expectGone(a);
    expect(qemuPidsFor(created)).toEqual([]);
  });

  it("stops in order on SIGTERM while VMs are still being adopted", { timeout: 300_000 }, async () => {
    const [frozen, other] = [await create(), await create()];
    await Promise.all([waitRunning(frozen), waitRunning(other)]);
    const frozenPid = Number.parseInt(qemuPidsFor([frozen])[0] ?? "", 10);
    await killChild();
    process.kill(frozenPid, "SIGSTOP");
    try {
      await startChild({ SANDTREE_ADOPT_DEADLINE_MS: "60000" });
      expect((await api("GET", `/v1/sandboxes/${frozen}`)).body.status).toBe("RUNNING");
      const proc = child as ChildProcess;
      const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
      proc.kill("SIGTERM");
      expect(await exited).toBe(0);
      child = null;
    } finally {
      try {
        process.kill(frozenPid, "SIGCONT");
      } catch {}
    }
    expect(output).toContain("received SIGTERM, stopping sandboxes");
    // Nothing orphaned: the adoption was cancelled and its QEMU killed, every other VM stopped.
    for (const id of [frozen, other]) {
      expect(dbStatus(id)).toBe("TERMINATED");
      await expectGone(id);
    }
  });
});

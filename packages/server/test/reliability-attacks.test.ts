// Attacks from inside a sandbox (an attacker and a neighbour on the same host): host files, a
// serial-channel flood, memory and disk exhaustion, a fork bomb. The host and the neighbour must
// keep answering, every answer right, and the attacker's own limits (time, output, memory, disk)
// hold. The neighbour's exec round trip is measured quiet and under each attack and reported in
// docs/reliability.md, not asserted: on a shared 2-core host, latency is the host's, not ours.
// Through the API: another team's key on the newer routes answers exactly like a missing id.
// (Secrets never in answers, logs or files: tenancy-vm.test.ts; revoked keys: tenancy-vm.test.ts.)
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestServer } from "./helpers.js";
import { median, qemuPidOf, recordFigures, settleCheckpoint, sleep, startServerAt } from "./reliability/harness.js";

const MEMORY_MIB = 256;
// What QEMU may hold beyond the guest's RAM (device state, TCG's translated code): the guest's
// allocations must stay in its RAM; a runaway awk or a 400 MiB tmpfs would go past this.
const QEMU_OVERHEAD_MIB = 384;
let t: TestServer;
let attacker: string;
let neighbour: string;
let quietMs = 0;
const errorLogs: string[] = [];
beforeAll(async () => {
  t = await startServerAt({ logStream: { write: (l: string) => (/"level":(50|60)/.test(l) ? errorLogs.push(l) : 0) } });
  const [a, n] = await Promise.all(
    [0, 1].map(() =>
      t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: MEMORY_MIB / 1024, disk_size_gb: 1 }),
    ),
  );
  attacker = a?.body.id;
  neighbour = n?.body.id;
  await Promise.all([t.waitRunning(attacker), t.waitRunning(neighbour)]);
});
afterAll(async () => {
  await t?.close();
});

const exec = (sb: string, command: string, timeout_seconds?: number) =>
  t.api("POST", `/v1/sandboxes/${sb}/exec`, { command, ...(timeout_seconds ? { timeout_seconds } : {}) });

let asked = 0;
/** One neighbour exec whose answer is known: its time, and what was wrong with the answer (if anything). */
async function roundTrip(): Promise<{ ms: number; wrong?: string }> {
  const n = ++asked;
  const s = performance.now();
  const r = await exec(neighbour, `echo n${n}`);
  const ms = performance.now() - s;
  const right = r.status === 200 && r.body.exit_code === 0 && r.body.stdout === `n${n}\n` && r.body.stderr === "";
  return right ? { ms } : { ms, wrong: `${r.status} ${JSON.stringify(r.body).slice(0, 300)}` };
}

/** The attacker's QEMU's peak resident memory, in MiB. */
function attackerPeakMiB(): number {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${qemuPidOf(attacker)}/status`, "utf8"));
  return Number(m?.[1]) / 1024;
}

/**
 * Runs the attack; while it runs, the neighbour keeps answering and every answer must be right.
 * Its round trip is recorded beside the quiet one for the report.
 */
async function underAttack(name: string, tried: string, command: string, seconds: number) {
  const started = performance.now();
  let done = false;
  const attack = exec(attacker, command, seconds).finally(() => (done = true));
  await sleep(1000); // let the attack get going
  const samples: number[] = [];
  const wrong: string[] = [];
  while (!done || samples.length < 5) {
    const rt = await roundTrip();
    samples.push(rt.ms);
    if (rt.wrong) wrong.push(rt.wrong);
    if (samples.length >= 40) break;
  }
  const r = await attack;
  const health = await fetch(`${t.url}/healthz`);
  const att = (await t.api("GET", `/v1/sandboxes/${attacker}`)).body;
  const peakMiB = att.status === "RUNNING" ? attackerPeakMiB() : Number.NaN;
  const p50 = median(samples);
  const ratio = p50 / quietMs;
  recordFigures("attacks", name, {
    tried,
    result: `neighbour answered ${samples.length - wrong.length}/${samples.length} right, p50 ${p50.toFixed(1)} ms under attack vs ${quietMs.toFixed(1)} ms quiet (${ratio.toFixed(2)}x); attack exec ${r.status} exit ${r.body.exit_code ?? r.body.code}; attacker ${att.status}, QEMU peak RSS ${peakMiB.toFixed(0)} MiB; /healthz ${health.status}`,
    figures: {
      neighbour_p50_ms: +p50.toFixed(1),
      neighbour_max_ms: +Math.max(...samples).toFixed(1),
      quiet_p50_ms: +quietMs.toFixed(1),
      ratio: +ratio.toFixed(2),
      samples: samples.length,
      attack_ms: Math.round(performance.now() - started),
      attack_status: r.status,
      attack_exit: r.body.exit_code ?? r.body.code,
      attacker_status: att.status,
      attacker_peak_rss_mib: Math.round(peakMiB),
      neighbour_wrong: wrong.length,
    },
  });
  expect(health.status).toBe(200);
  expect(wrong, `${name}: the neighbour's answers under attack`).toEqual([]);
  expect(samples.length).toBeGreaterThanOrEqual(5);
  if (att.status === "RUNNING") expect(peakMiB, `${name}: attacker QEMU peak RSS`).toBeLessThan(MEMORY_MIB + QEMU_OVERHEAD_MIB);
  return { r, att };
}

describe("attacks from inside a sandbox", () => {
  it("measures the neighbour's quiet round trip (every answer right)", { timeout: 120_000 }, async () => {
    const wrong: string[] = [];
    for (let i = 0; i < 3; i++) await roundTrip();
    const xs: number[] = [];
    for (let i = 0; i < 20; i++) {
      const rt = await roundTrip();
      xs.push(rt.ms);
      if (rt.wrong) wrong.push(rt.wrong);
    }
    quietMs = median(xs);
    recordFigures("attacks", "quiet", {
      tried: "neighbour `echo` exec round trip, 20 runs, nothing else running",
      result: `p50 ${quietMs.toFixed(1)} ms, max ${Math.max(...xs).toFixed(1)} ms`,
      figures: { p50_ms: +quietMs.toFixed(1), max_ms: +Math.max(...xs).toFixed(1) },
    });
    expect(wrong).toEqual([]);
  });

  it("sees only its own disk: no host paths, its own hostname, the agent as PID 1", { timeout: 60_000 }, async () => {
    const host = readFileSync("/etc/hostname", "utf8").trim();
    const r = await exec(
      attacker,
      "cat /etc/hostname; echo ---; tr '\\0' ' ' < /proc/1/cmdline; echo; echo ---; ls / | tr '\\n' ' '; echo; echo ---; " +
        "ls -d /work /root/.cache /home/* /var/lib/docker 2>&1 | head -5; echo ---; cat /proc/mounts | cut -d' ' -f1-3 | tr '\\n' ';'",
    );
    const [hostname, pid1, root, hostPaths, mounts] = String(r.body.stdout)
      .split("---\n")
      .map((s) => s.trim());
    recordFigures("attacks", "host-files", {
      tried: "read /etc/hostname, /proc/1/cmdline, list / and host paths (/work, /root/.cache, /home), /proc/mounts",
      result: `hostname "${hostname}", PID 1 "${pid1}", host paths: ${hostPaths?.replace(/\n/g, "; ")}`,
      figures: { root, mounts },
    });
    expect(hostname).toBe("sandbox");
    expect(hostname).not.toBe(host);
    expect(pid1).toMatch(/init/);
    expect(hostPaths).not.toMatch(/^\/work$/m);
    expect(String(r.body.stdout)).not.toContain("sandtree-"); // no host data dir or socket path leaks
  });

  it("serial flood: a process printing as fast as it can plus 20 parallel execs", { timeout: 180_000 }, async () => {
    const parallel = Promise.all(Array.from({ length: 20 }, (_, i) => exec(attacker, `echo p${i}`)));
    const { r } = await underAttack(
      "serial-flood",
      "`yes` of 1 KiB lines for 10 s through the exec channel (buffered exec, spilled past 16 MiB) + 20 parallel execs",
      `line=$(head -c 1024 /dev/zero | tr '\\0' A); yes "$line"`,
      10,
    );
    const outs = await parallel;
    expect(outs.map((o) => `${o.status} ${o.body.stdout}`)).toEqual(outs.map((_, i) => `200 p${i}\n`));
    // Its limits held: stopped at its time limit, its answer cut at the output cap.
    expect(r.status).toBe(200);
    expect(r.body.timed_out).toBe(true);
    expect(r.body.stdout_truncated).toBe(true);
  });

  it("memory exhaustion: allocating more than the VM has", { timeout: 180_000 }, async () => {
    const { att } = await underAttack(
      "memory",
      "awk doubling a string without end, then 400 MiB into a tmpfs, in a 256 MiB VM, 30 s limit each",
      "awk 'BEGIN { s = \"x\"; while (1) s = s s }'; echo awk=$?; mkdir -p /m && mount -t tmpfs -o size=1g tmpfs /m && " +
        "dd if=/dev/zero of=/m/x bs=1M count=400 2>&1 | tail -1; rm -f /m/x; umount /m",
      30,
    );
    expect(["RUNNING", "ERROR"]).toContain(att.status);
    // When the time limit killed the attack mid-way, its tmpfs still holds the VM's memory:
    // free it, or the next attack in this VM is OOM-killed for the wrong reason.
    if (att.status === "RUNNING") await exec(attacker, "rm -f /m/x; umount /m 2>/dev/null; echo ok", 60);
  });

  // Writing under TCG runs at roughly 10 MB/s: CI writes 250 MB of the 1 GB disk;
  // SANDTREE_ATTACK_DISK_FULL=1 fills it to ENOSPC (a few minutes).
  const fillFull = process.env.SANDTREE_ATTACK_DISK_FULL === "1";
  it(fillFull
    ? "disk exhaustion: filling /"
    : "disk pressure: 250 MB written to / (fill to ENOSPC with SANDTREE_ATTACK_DISK_FULL=1)", { timeout: 600_000 }, async () => {
    // busybox here has no dd: head writes the zeros.
    const bytes = fillFull ? 2_000_000_000 : 250_000_000;
    const { r } = await underAttack(
      "disk",
      `\`head -c ${bytes} /dev/zero > /root/fill\` on a 1 GB disk, ${fillFull ? 400 : 90} s limit`,
      `head -c ${bytes} /dev/zero > /root/fill; echo rc=$?; sync; df -k / | tail -1`,
      fillFull ? 400 : 90,
    );
    const cleaned = await exec(attacker, "rm -f /root/fill; sync; echo ok");
    recordFigures("attacks", "disk-inside", {
      tried: "what the attacker saw after writing, and cleaning up",
      result: `${String(r.body.stdout).trim().replace(/\n/g, " | ")}; stderr "${String(r.body.stderr).trim().slice(0, 80)}"; rm afterwards: ${cleaned.body.stdout?.trim()}`,
    });
    expect(r.status).toBe(200);
    expect(r.body.stdout).toMatch(fillFull ? /rc=1/ : /rc=0/);
    // It wrote into its own 1 GB disk, which is all it sees (df: filesystem, 1K-blocks, ...).
    const df = String(r.body.stdout).trim().split("\n").at(-1)?.split(/\s+/) ?? [];
    expect(Number(df[1])).toBeGreaterThan(0);
    expect(Number(df[1])).toBeLessThanOrEqual(1024 * 1024);
    if (fillFull) expect(r.body.stderr).toMatch(/No space left/);
    expect(cleaned.body.stdout).toBe("ok\n");
  });

  it("fork bomb under a time limit", { timeout: 240_000 }, async () => {
    // busybox ash does not take `:` as a function name: the same bomb named f.
    await underAttack(
      "fork-bomb",
      "`f(){ f|f& };f` (the classic `:(){ :|:& };:` renamed for ash), timeout_seconds 15",
      "f(){ f|f& };f",
      15,
    );
    const after = await exec(attacker, "echo still", 30);
    // The attacker may be wrecked; the host stays healthy and answers for it.
    const st = await t.api("GET", `/v1/sandboxes/${attacker}`);
    expect(st.status).toBe(200);
    recordFigures("attacks", "fork-bomb-after", {
      tried: "an exec in the attacker after the fork bomb's time limit",
      result: `${after.status} exit ${after.body.exit_code ?? after.body.code} stdout "${String(after.body.stdout ?? "").trim()}"; attacker ${st.body.status}`,
    });
    expect(errorLogs.filter((l) => l.includes("unhandled error"))).toEqual([]);
  });
});

describe("attacks through the API on the newer routes", () => {
  it("another team's key sees the owner's resources exactly like missing ones", { timeout: 180_000 }, async () => {
    await t.api("POST", "/v1/teams", { name: "intruders" });
    const evilKey: string = (await t.api("POST", "/v1/keys", { team: "intruders" })).body.key;
    const evil = (m: string, p: string, b?: unknown) => t.api(m, p, b, { authorization: `Bearer ${evilKey}` });
    const owner = neighbour;
    const job = (await t.api("POST", `/v1/sandboxes/${owner}/jobs`, { command: "sleep 300" })).body;
    const ex = (await exec(owner, "echo out")).body;
    const ck = (await t.api("POST", `/v1/sandboxes/${owner}/checkpoints`, {})).body;
    expect((await settleCheckpoint(t, ck.id)).state).toBe("DURABLE");
    const missing = {
      sb: "sb-aaaaaaaaaaaaaaaa",
      job: "job-0000000000000000",
      ex: "ex-0000000000000000",
      ck: "ck-00000000000000000000",
    };
    const real = { sb: owner, job: job.job_id, ex: ex.exec_id, ck: ck.id };
    type Ids = typeof real;
    const routes: Array<[string, (x: Ids) => string, ((x: Ids) => unknown)?]> = [
      ["POST", (x) => `/v1/sandboxes/${x.sb}/jobs`, () => ({ command: "touch /tmp/pwned" })],
      ["GET", (x) => `/v1/sandboxes/${x.sb}/jobs`],
      ["GET", (x) => `/v1/sandboxes/${x.sb}/jobs/${x.job}`],
      ["GET", (x) => `/v1/sandboxes/${x.sb}/jobs/${x.job}/output?stream=stdout`],
      ["POST", (x) => `/v1/sandboxes/${x.sb}/jobs/${x.job}/kill`, () => ({ signal: "SIGKILL" })],
      ["GET", (x) => `/v1/sandboxes/${x.sb}/execs/${x.ex}/output?stream=stdout`],
      ["GET", (x) => `/v1/sandboxes/${x.sb}/checkpoints`],
      ["POST", (x) => `/v1/sandboxes/${x.sb}/checkpoints`, () => ({})],
      ["GET", (x) => `/v1/checkpoints/${x.ck}`],
      ["POST", (x) => `/v1/sandboxes/${x.sb}/fork`, () => ({})],
      ["POST", () => "/v1/sandboxes", (x) => ({ checkpoint_id: x.ck })],
      ["POST", (x) => `/v1/sandboxes/${x.sb}/pause`],
      ["POST", (x) => `/v1/sandboxes/${x.sb}/resume`],
      ["GET", (x) => `/v1/sandboxes/${x.sb}/pty`],
      ["DELETE", (x) => `/v1/checkpoints/${x.ck}`],
    ];
    const norm = (r: { status: number; body: unknown }, ids: string[]) => {
      let text = typeof r.body === "string" ? r.body : JSON.stringify(r.body);
      for (const x of ids) text = text.replaceAll(x, "<ID>");
      return { status: r.status, body: text.replace(/"request_id":"[^"]*"/, "") };
    };
    const table: string[] = [];
    for (const [m, p, b] of routes) {
      const foreign = await evil(m, p(real), b?.(real));
      const absent = await evil(m, p(missing), b?.(missing));
      table.push(`${m} ${p({ sb: "{id}", job: "{job}", ex: "{exec}", ck: "{cid}" })}: ${foreign.status}`);
      expect(foreign.status, `${m} ${p(real)}`).toBeGreaterThanOrEqual(400);
      expect(norm(foreign, Object.values(real)), `${m} ${p(real)}`).toEqual(norm(absent, Object.values(missing)));
    }
    const bulk = await evil("POST", "/v1/sandboxes/bulk-delete", { ids: [owner] });
    const batch = await evil("POST", "/v1/sandboxes/batch-status", { ids: [owner] });
    expect(bulk.body).toMatchObject({ deleted: [], not_found: [owner] });
    expect(batch.body).toMatchObject({ sandboxes: [], not_found: [owner] });
    // Nothing happened to the owner's resources.
    expect((await t.api("GET", `/v1/sandboxes/${owner}`)).body.status).toBe("RUNNING");
    expect((await t.api("GET", `/v1/sandboxes/${owner}/jobs/${job.job_id}`)).body.status).toBe("RUNNING");
    expect((await t.api("GET", `/v1/checkpoints/${ck.id}`)).body.state).toBe("DURABLE");
    expect((await exec(owner, "ls /tmp/pwned 2>&1")).body.stdout).toMatch(/No such file/);
    recordFigures("attacks", "api-isolation", {
      tried: `another team's key on ${routes.length + 2} newer routes (jobs, exec output, checkpoints, fork, restore, pause/resume, pty, bulk-delete, batch-status)`,
      result:
        "every answer identical to a missing id's; bulk-delete/batch-status report the id as not_found; owner's sandbox, job and checkpoint untouched",
      figures: { routes: table },
    });
  });
});

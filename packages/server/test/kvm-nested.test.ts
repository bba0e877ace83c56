import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";
import { sandboxDiagnosis } from "./sandbox-diagnosis.js";

// The KVM path, run for real: a sandbox with nested virtualization (TCG emulates SVM, so its
// /dev/kvm works) runs a sandtree server of its own, which must detect KVM by its trial boot and
// then create, clone, checkpoint, fork, reset, pause and adopt its sandboxes under -accel kvm.
// scripts/kvm/bundle.mjs packs this checkout's server for it; scripts/kvm/inner-suite.mjs is what
// runs inside (and prints each step's verdict), ending with Docker in an inner sandbox.
// Slow under nested emulation: one sandbox, one run.

const repo = path.resolve(import.meta.dirname, "../../..");
const HOOK_MS = 1_800_000;
// Docker in an inner sandbox (the bundle then carries sandtree/docker, ~450 MB more); the whole
// file took 374 s with it at load ~5. SANDTREE_KVM_DOCKER=0 leaves it out.
const DOCKER = process.env.SANDTREE_KVM_DOCKER !== "0";
const work = mkdtempSync(path.join(tmpdir(), "sandtree-kvm-"));
let t: TestServer;
let outer: string;
let report: { accel: string | null; steps: Array<{ name: string; ok: boolean; ms: number; detail?: unknown }> };

// What a failure says besides its own message: the nested sandbox's status, error_reason, last
// events and console, and the inner job's status and output tails (a sandbox gone ERROR, e.g. its
// 3 GiB guest, says so there and nowhere else).
let jobId: string | undefined;
let lastTail = "";
let diagnosis = "";
const explain = async () =>
  outer
    ? `--- the nested sandbox ---\n${await sandboxDiagnosis(t.api, outer, { ...(jobId ? { jobId } : {}), lastJobTail: lastTail, consoleBytes: 4000 })}\n${await innerServerLog()}`
    : "--- no nested sandbox was created ---";

/** The tail of the inner server's own log (warnings such as a failed template build say why there). */
async function innerServerLog(): Promise<string> {
  const r = await t.api("POST", `/v1/sandboxes/${outer}/exec`, {
    command: "tail -c 4000 /root/inner-server.log 2>/dev/null || echo '(no inner server log)'",
    timeout_seconds: 60,
  });
  return `--- the inner server's log ---\n${r.body.stdout ?? JSON.stringify(r.body)}`;
}

// What another nested sandbox needs of the hook's time (a pass took 4.5-5 minutes at load 1-5).
const RETRY_NEEDS_MS = 12 * 60_000;
// Nested sandboxes tried at most (the kernel deaths below came 70-150 s into the suite, in 3 of
// 7 runs on 2026-12-06: one more try each costs ~3-4 minutes when it happens).
const ATTEMPTS = 3;

/**
 * Whether the nested sandbox ended because its own kernel reset or panicked (QEMU, run with
 * -no-reboot, exits 0): seen in CI, "corrupted stack end detected inside scheduler" in the
 * nested sandbox's kvm_arch_vcpu_ioctl_run, and once with nothing on its console (a triple
 * fault), both while its KVM ran guests on TCG's emulated SVM.
 */
async function outerReset(): Promise<boolean> {
  // The server marks it ERROR as it sees QEMU's exit: a failed call may come first.
  for (let i = 0; i < 30 && outer; i++) {
    const sb = await t.api("GET", `/v1/sandboxes/${outer}`);
    if (sb.body.status === "ERROR") return sb.body.error_code === "GUEST_RESET";
    if (!["PENDING", "PROVISIONING", "RUNNING"].includes(sb.body.status)) return false;
    await new Promise((r) => setTimeout(r, 500));
  }
  return false;
}

async function setUp(began: number): Promise<void> {
  // The nested sandbox runs KVM guests under an emulated CPU: while they boot and do I/O its own
  // agent answers the watchdog's ping late (30 s killed a live one, ERROR "stopped answering",
  // QMP still answering, 2026-12-05 and stop 44): the liveness deadline matches, as the inner
  // server's does (scripts/kvm/inner-suite.mjs).
  t = await startTestServer({ deadlines: { agentMs: 120_000 } });
  // Before the hook's own timeout, so a late run still says which steps it passed.
  const deadline = began + HOOK_MS - 60_000;
  const bundle = path.join(work, "bundle.tar");
  const cores = await nestedCores();
  for (let attempt = 1; ; attempt++) {
    try {
      await runNested(bundle, deadline, cores, attempt === 1);
      return;
    } catch (err) {
      // A nested sandbox whose kernel died is this machine's emulator, not sandtree: again, with
      // a new one, and the dead one's story printed; anything else fails here.
      if (attempt >= ATTEMPTS || deadline - Date.now() < RETRY_NEEDS_MS || !(await outerReset())) throw err;
      console.log(
        `the nested sandbox's guest reset or panicked; trying again with a new one (attempt ${attempt} of ${ATTEMPTS} ended so):\n${
          err instanceof Error ? err.message : String(err)
        }\n${await explain()}`,
      );
      await t.api("DELETE", `/v1/sandboxes/${outer}`);
      outer = "";
      jobId = undefined;
      lastTail = "";
    }
  }
}

/**
 * The nested sandbox's vCPUs: one where this host runs it under TCG, whose emulated SVM with two
 * vCPUs run in parallel (MTTCG) killed the nested sandbox's kernel or reset it (triple fault) while
 * its KVM ran guests: 3 of 3 runs of a stress probe (L1 with 2 vCPUs booting 4 KVM guests at once,
 * 8 rounds: two silent resets, one hang after a guest's reset), and none of 2 with one vCPU
 * (scripts/kvm/nested-stress.sh; docs/architecture.md). Two under KVM.
 */
async function nestedCores(): Promise<number> {
  const hosts = await t.api("GET", "/v1/hosts");
  expect(hosts.status, JSON.stringify(hosts.body)).toBe(200);
  const local = hosts.body.hosts.find((h: { name: string }) => h.name === "local");
  return local?.capacity.accel === "kvm" ? 2 : 1;
}

/** One nested sandbox: the bundle in it (built on the first), the inner suite run there, its report read. */
async function runNested(bundle: string, deadline: number, cores: number, buildBundle: boolean): Promise<void> {
  const r = await t.api("POST", "/v1/sandboxes", {
    image: "sandtree/debian",
    memory_gb: 3,
    cpu_cores: cores,
    disk_size_gb: 6,
    nested_virtualization: true,
    timeout_minutes: 60,
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  outer = r.body.id;
  if (buildBundle) {
    const bundleArgs = DOCKER ? ["--with-docker", bundle] : [bundle];
    // Its stderr goes into the error a failure throws.
    execFileSync(process.execPath, [path.join(repo, "scripts/kvm/bundle.mjs"), ...bundleArgs], {
      stdio: ["ignore", "ignore", "pipe"],
      maxBuffer: 16 * 1024 * 1024,
    });
  }
  await t.waitRunning(outer);
  const up = await t.api("PUT", `/v1/sandboxes/${outer}/files?path=/root/bundle.tar`, readFileSync(bundle), {
    "content-type": "application/octet-stream",
  });
  expect(up.status, JSON.stringify(up.body)).toBe(200);
  const unpack = await t.api("POST", `/v1/sandboxes/${outer}/exec`, {
    command: "tar -C / --keep-directory-symlink -xf /root/bundle.tar && rm /root/bundle.tar",
    timeout_seconds: 600,
  });
  expect(unpack.body.exit_code, JSON.stringify(unpack.body)).toBe(0);
  // A job, not an exec: the suite takes minutes, longer than one HTTP answer should wait.
  // Its output also goes to a file in the sandbox, and its kernel's log is read on a failure: a
  // run killed before its report still says why. The inner suite's budget ends two minutes
  // before the deadline (its server's stop and the report fit in them).
  const budgetMs = Math.max(60_000, deadline - Date.now() - 120_000);
  const job = await t.api("POST", `/v1/sandboxes/${outer}/jobs`, {
    command: `cd /opt/sandtree && INNER_BUDGET_MS=${budgetMs} INNER_SERVER_LOG=/root/inner-server.log node inner-suite.mjs > /root/inner.log 2>&1; rc=$?; cat /root/inner.log; exit $rc`,
  });
  expect(job.status, JSON.stringify(job.body)).toBe(201);
  jobId = job.body.job_id as string;
  let done: { status: string; stdout_tail: string; stderr_tail: string } | undefined;
  while (Date.now() < deadline) {
    const j = await t.api("GET", `/v1/sandboxes/${outer}/jobs/${jobId}`);
    // A job that cannot be read (its sandbox gone) is a failure, not an ended job.
    if (j.status !== 200) throw new Error(`the inner job could not be read: ${j.status} ${JSON.stringify(j.body)}`);
    lastTail = j.body.stdout_tail ?? "";
    if (j.body.status !== "RUNNING") {
      done = j.body;
      break;
    }
    await new Promise((r) => setTimeout(r, 5000));
  }
  if (!done) throw new Error("the inner suite did not end in time");
  const last = done.stdout_tail.trim().split("\n").pop() ?? "";
  try {
    report = JSON.parse(last);
  } catch {
    const why = await t.api("POST", `/v1/sandboxes/${outer}/exec`, {
      command: "tail -c 3000 /root/inner.log; dmesg | tail -n 30",
      timeout_seconds: 60,
    });
    throw new Error(
      `the inner suite printed no report (${done.status})\n` +
        `its log and the sandbox's kernel log:\n${why.body.stdout ?? JSON.stringify(why.body)}`,
    );
  }
}

beforeAll(async () => {
  try {
    await setUp(Date.now());
  } catch (err) {
    throw new Error(`${err instanceof Error ? err.message : String(err)}\n${t ? await explain() : ""}`, { cause: err });
  }
  // A step that failed inside says why in its detail; the sandbox's side goes with it.
  if (report.steps.some((s) => !s.ok)) diagnosis = await explain();
  // A step tried twice because an inner guest reset (inner-suite.mjs) passes, and says so here.
  for (const s of report.steps) {
    const first = (s.detail as { retried_after_guest_reset?: string } | undefined)?.retried_after_guest_reset;
    if (s.ok && first) console.log(`"${s.name}" passed on its second attempt; the first: ${first}`);
  }
}, HOOK_MS);

afterAll(async () => {
  await t?.close();
  rmSync(work, { recursive: true, force: true });
});

const verdict = (name: string) => {
  const s = report.steps.find((x) => x.name === name);
  expect(s, `no step "${name}" in ${JSON.stringify(report.steps.map((x) => x.name))}\n${diagnosis}`).toBeDefined();
  return s;
};

describe("sandtree under KVM, inside a nested sandbox", () => {
  it("detects KVM by its trial boot", () => {
    expect(verdict("server starts and picks its accelerator"), diagnosis).toMatchObject({ ok: true, detail: "kvm" });
    expect(report.accel, diagnosis).toBe("kvm");
  });

  for (const name of [
    "cold create and exec",
    "warm create from a template",
    "files",
    "filesystem checkpoint and fork",
    "memory fork into 4: distinct random bytes, correct clocks",
    "reset to the memory checkpoint",
    "pause and resume",
    "restart of the server adopts its VMs",
    "delete",
    ...(DOCKER ? ["docker run in a sandbox"] : []),
  ]) {
    it(name, () => {
      const s = verdict(name);
      expect(s?.ok, `${JSON.stringify(s?.detail)}\n${diagnosis}`).toBe(true);
    });
  }
});

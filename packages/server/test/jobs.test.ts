import path from "node:path";
import { AgentClient } from "@sandtree/host";
import type { QemuMachine } from "@sandtree/host/qemu";
import { SandtreeClient } from "@sandtree/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { qemuPidsFor, startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;
let id: string;
let teamId: string;

beforeAll(async () => {
  t = await startTestServer();
  const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
  expect(r.status).toBe(201);
  id = r.body.id;
  teamId = r.body.team_id;
  await t.waitRunning(id);
});
afterAll(async () => {
  await t?.close();
});

const start = async (body: Record<string, unknown>) => {
  const r = await t.api("POST", `/v1/sandboxes/${id}/jobs`, body);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  expect(r.body.status).toBe("RUNNING");
  return r.body.job_id as string;
};

async function waitEnded(jobId: string, timeoutMs = 60_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await t.api("GET", `/v1/sandboxes/${id}/jobs/${jobId}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    if (r.body.status !== "RUNNING") return r.body;
    if (Date.now() > deadline) throw new Error(`job ${jobId} still running`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`no ${what} within ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 250));
  }
}

/** A new small sandbox (`extra` on its create) RUNNING a job that prints "before" and sleeps: its id and the job's URL. */
async function jobPrintingBefore(extra: Record<string, unknown>): Promise<{ other: string; url: string }> {
  const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1, ...extra });
  expect(r.status).toBe(201);
  const other = r.body.id as string;
  await t.waitRunning(other);
  const started = await t.api("POST", `/v1/sandboxes/${other}/jobs`, { command: "echo before; sleep 600" });
  expect(started.status, JSON.stringify(started.body)).toBe(201);
  return { other, url: `/v1/sandboxes/${other}/jobs/${started.body.job_id}` };
}

describe("background jobs on a real microVM", () => {
  it("runs a job detached and reports its output tails and exit status", async () => {
    const jobId = await start({ command: "echo out; echo err >&2; sleep 1; exit 3" });
    const job = await waitEnded(jobId);
    expect(job).toMatchObject({
      job_id: jobId,
      status: "EXITED",
      exit_code: 3,
      stdout_tail: "out\n",
      stderr_tail: "err\n",
      stdout_bytes: 4,
      stderr_bytes: 4,
      stdout_truncated: false,
    });
    expect(Date.parse(job.ended_at)).toBeGreaterThanOrEqual(Date.parse(job.started_at) - 1000);
    const list = await t.api("GET", `/v1/sandboxes/${id}/jobs`);
    expect(list.body.jobs.map((j: { job_id: string }) => j.job_id)).toContain(jobId);
  });

  it("passes argv words quoted, env, cwd and user", async () => {
    const jobId = await start({
      command: ["sh", "-c", 'echo "$1 $FOO"; pwd; id -u', "x", "it's $HOME"],
      env: { FOO: "bar" },
      cwd: "/tmp",
      user: "user",
    });
    const job = await waitEnded(jobId);
    expect(job.exit_code).toBe(0);
    expect(job.stdout_tail).toBe("it's $HOME bar\n/tmp\n1000\n");
  });

  it("serves output from any offset while tails stay short", async () => {
    const jobId = await start({ command: "i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done" });
    const job = await waitEnded(jobId);
    const expected = Array.from({ length: 3000 }, (_, i) => `line-${i}\n`).join("");
    expect(job.stdout_bytes).toBe(expected.length);
    expect(job.stdout_truncated).toBe(true);
    expect(expected.endsWith(job.stdout_tail)).toBe(true);
    expect(job.stdout_tail.length).toBeLessThanOrEqual(16 * 1024);
    const all = await fetch(`${t.url}/v1/sandboxes/${id}/jobs/${jobId}/output?stream=stdout`, {
      headers: { authorization: `Bearer ${t.key}` },
    });
    expect(await all.text()).toBe(expected);
    const part = await t.api("GET", `/v1/sandboxes/${id}/jobs/${jobId}/output?offset=7&length=6`);
    expect(part.body).toBe(expected.slice(7, 13));
    const past = await t.api("GET", `/v1/sandboxes/${id}/jobs/${jobId}/output?stream=stderr&offset=100`);
    expect(past).toMatchObject({ status: 200, body: "" });
  });

  it("kills the job's whole process group and reports KILLED", async () => {
    const jobId = await start({ command: "sleep 1000 & sleep 1001; echo never" });
    await new Promise((r) => setTimeout(r, 500));
    const killed = await t.api("POST", `/v1/sandboxes/${id}/jobs/${jobId}/kill`, { signal: "SIGTERM" });
    expect(killed.status, JSON.stringify(killed.body)).toBe(200);
    const job = await waitEnded(jobId);
    expect(job).toMatchObject({ status: "KILLED", exit_code: 143, stdout_tail: "" });
    const ps = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command: "ps | grep -c 'sleep 100[01]' || true" });
    expect(ps.body.stdout.trim()).toBe("0");
    const again = await t.api("POST", `/v1/sandboxes/${id}/jobs/${jobId}/kill`, {});
    expect(again.body.status).toBe("KILLED");
  });

  it("keeps running across a re-established agent connection", async () => {
    const jobId = await start({ command: "sleep 2; echo done" });
    const { vm } = (await t.server.services.sandboxes.running(teamId, id)) as QemuMachine;
    vm.agent.close();
    vm.agent = await AgentClient.connect(path.join(vm.opts.runDir, "agent.sock"), { timeoutMs: 30_000 });
    const job = await waitEnded(jobId);
    expect(job).toMatchObject({ status: "EXITED", exit_code: 0, stdout_tail: "done\n" });
  });

  it("answers 404 for unknown jobs and jobs of another sandbox, 400 for bad requests", async () => {
    const jobId = await start({ command: "true" });
    const other = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    try {
      const r = await t.api("GET", `/v1/sandboxes/${other.body.id}/jobs/${jobId}`);
      expect(r).toMatchObject({ status: 404, body: { code: "JOB_NOT_FOUND" } });
    } finally {
      await t.api("DELETE", `/v1/sandboxes/${other.body.id}`);
    }
    expect((await t.api("GET", `/v1/sandboxes/${id}/jobs/job-0000000000000000`)).status).toBe(404);
    expect((await t.api("GET", `/v1/sandboxes/${id}/jobs/../../x`)).status).toBe(404);
    expect((await t.api("POST", `/v1/sandboxes/${id}/jobs`, { command: "" })).status).toBe(400);
    expect((await t.api("POST", `/v1/sandboxes/${id}/jobs/${jobId}/kill`, { signal: "SIGNOPE" })).status).toBe(400);
    expect((await t.api("GET", `/v1/sandboxes/${id}/jobs/${jobId}/output?stream=both`)).status).toBe(400);
  });

  it("works through the SDK: start, follow, output, kill, batch status", async () => {
    const client = new SandtreeClient({ apiUrl: t.url, apiKey: t.key });
    const job = await client.sandboxes.jobs.start(id, "for i in 1 2 3; do echo tick-$i; sleep 0.3; done", { env: { A: "b" } });
    let text = "";
    const it = client.sandboxes.jobs.follow(id, job.job_id, { intervalMs: 100 });
    for (;;) {
      const next = await it.next();
      if (next.done) {
        expect(next.value).toMatchObject({ status: "EXITED", exit_code: 0 });
        break;
      }
      text += Buffer.from(next.value).toString("utf8");
    }
    expect(text).toBe("tick-1\ntick-2\ntick-3\n");
    expect(Buffer.from(await client.sandboxes.jobs.output(id, job.job_id, { offset: 7 })).toString()).toBe("tick-2\ntick-3\n");
    const sleeper = await client.sandboxes.jobs.start(id, ["sleep", "1000"]);
    await client.sandboxes.jobs.kill(id, sleeper.job_id, "SIGKILL");
    await expect(waitEnded(sleeper.job_id)).resolves.toMatchObject({ status: "KILLED", exit_code: 137 });
    expect((await client.sandboxes.jobs.list(id)).jobs.length).toBeGreaterThanOrEqual(2);
    const buffered = await client.sandboxes.run(id, "printf abcdef");
    expect(Buffer.from(await client.sandboxes.execOutput(id, buffered.exec_id ?? "", { offset: 2, length: 3 })).toString()).toBe(
      "cde",
    );
    const st = await client.sandboxes.batchStatus([id, "sb-missing"]);
    expect(st).toEqual({ sandboxes: [{ id, status: "RUNNING", error_reason: null }], not_found: ["sb-missing"] });
  });

  it("keeps the output a job printed when its sandbox's QEMU is killed", async () => {
    const { other, url } = await jobPrintingBefore({});
    await until(async () => (await t.api("GET", url)).body.stdout_tail === "before\n", "the job's first line");
    const pids = qemuPidsFor([other]).map((l) => Number.parseInt(l, 10));
    expect(pids).toHaveLength(1);
    process.kill(pids[0] as number, "SIGKILL");
    await until(async () => (await t.api("GET", `/v1/sandboxes/${other}`)).body.status === "ERROR", "the sandbox's ERROR");
    const job = (await t.api("GET", url)).body;
    expect(job).toMatchObject({ status: "KILLED", exit_code: null, stdout_tail: "before\n", stdout_bytes: 7 });
    expect(job.error_reason).toContain("ERROR");
    await t.api("DELETE", `/v1/sandboxes/${other}`);
    expect((await t.api("GET", url)).body).toMatchObject({ status: "KILLED", stdout_tail: "before\n" });
  });

  it("keeps the output a job printed when its sandbox times out", async () => {
    const { other, url } = await jobPrintingBefore({ timeout_minutes: 1 });
    await until(async () => (await t.api("GET", `${url}/output?stream=stdout`)).body === "before\n", "the job's output");
    // Two minutes on: this sandbox's timeout has passed, the file's sandbox's (60) has not.
    expect(await t.server.services.timeouts.sweep(Date.now() + 120_000)).toEqual([other]);
    // The sweep tears down in the background; the tails are read before the machine stops.
    await until(async () => (await t.api("GET", url)).body.stdout_tail === "before\n", "the kept output");
    const job = (await t.api("GET", url)).body;
    expect(job).toMatchObject({ status: "KILLED", exit_code: null, stdout_bytes: 7 });
    expect(job.error_reason).toContain("TIMEOUT");
    await t.api("DELETE", `/v1/sandboxes/${other}`);
  });

  it("ends a running job as KILLED when its sandbox ends, keeping what it printed", async () => {
    const jobId = await start({ command: "echo before; echo warn >&2; sleep 1000" });
    // Read through /output, which leaves the job's record alone: the delete reads the tails last.
    const output = `/v1/sandboxes/${id}/jobs/${jobId}/output?stream=stderr`;
    await until(async () => (await t.api("GET", output)).body === "warn\n", "the job's output");
    await t.api("DELETE", `/v1/sandboxes/${id}`);
    const r = await t.api("GET", `/v1/sandboxes/${id}/jobs/${jobId}`);
    expect(r.body).toMatchObject({ status: "KILLED", exit_code: null, stdout_tail: "before\n", stderr_tail: "warn\n" });
    expect(r.body.error_reason).toContain("TERMINATED");
    expect((await t.api("GET", `/v1/sandboxes/${id}/jobs/${jobId}/output`)).body.code).toBe("SANDBOX_NOT_RUNNING");
  });
});

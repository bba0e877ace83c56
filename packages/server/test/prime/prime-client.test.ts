import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../helpers.js";
import { runPrime } from "./prime-helpers.js";

// The real `prime_sandboxes` client (PyPI, pinned in clients/compat/requirements.txt) against a
// real server and real VMs, configured only by PRIME_API_BASE_URL and PRIME_API_KEY (#39).

let t: TestServer;
let env: { base: string; key: string };
let foreignEnv: { base: string; key: string };
let id: string;
let created: any;

const step = (name: string, args: object = {}, e = env) => runPrime("prime_steps.py", [name, JSON.stringify(args)], e);

beforeAll(async () => {
  t = await startTestServer();
  env = { base: `${t.url}/prime`, key: t.key };
  expect((await t.api("POST", "/v1/teams", { name: "elsewhere" })).status).toBe(201);
  const other = await t.api("POST", "/v1/keys", { team: "elsewhere" });
  foreignEnv = { base: env.base, key: other.body.key };
  // Code written for Prime names public images (verifiers' default is python:3.11-slim): an admin
  // alias points the name at an image this air-gapped host has.
  expect((await t.api("PUT", "/v1/images/aliases", { name: "python:3.11-slim", target: "sandtree/debian" })).status).toBe(200);
  created = await step("create", {
    name: "prime-main",
    image: "python:3.11-slim",
    start_command: { executable: "/bin/sh", args: ["-c", "echo started > /tmp/start-ran; exec sleep infinity"] },
    environment_vars: { FROM_CREATE: "yes" },
    secrets: { SECRET_TOKEN: "s3cret" },
    labels: ["suite", "team=prime"],
    idle_timeout_minutes: 30,
    idempotency_key: "prime-main-once",
  });
  id = created.created.id;
}, 600_000);

afterAll(async () => {
  await t?.close();
});

describe("prime_sandboxes against sandtree", () => {
  it("creates a sandbox with the client's fields and waits for it (the idempotency key replays it, the image alias resolves)", () => {
    const sb = created.got;
    expect(sb.status).toBe("RUNNING");
    expect(created.replayed_id).toBe(id);
    expect(created.auth_seeded).toBe(true);
    expect(sb.docker_image).toBe("sandtree/debian:latest");
    expect(sb.start_command).toEqual({
      executable: "/bin/sh",
      args: ["-c", "echo started > /tmp/start-ran; exec sleep infinity"],
    });
    expect(sb.cpu_cores).toBe(1);
    expect(sb.memory_gb).toBe(0.5);
    expect(sb.disk_size_gb).toBe(2);
    expect(sb.timeout_minutes).toBe(-1);
    expect(sb.idle_timeout_minutes).toBe(30);
    expect(sb.environment_vars).toEqual({ FROM_CREATE: "yes" });
    expect(sb.secrets).toEqual({ SECRET_TOKEN: "***" });
    expect(sb.labels.sort()).toEqual(["suite", "team=prime"]);
    expect(sb.vm).toBe(true);
  });

  it("executes commands over the Connect command session: stdout, stderr, exit code, env, cwd, user, timeout", async () => {
    const r = await step("exec", { id });
    expect(r.stdout).toBe("out\nhi s3cret\n/tmp\n");
    expect(r.stderr).toBe("err\n");
    expect(r.exit_code).toBe(3);
    expect(r.user).toBe("nobody");
    expect(r.timeout_error).toMatch(/timed out after 2s/);
    // The command that timed out was killed in the VM.
    expect(r.sleeps_left).toBe("0");
    // The start command ran (executable and args, no shell of the client's), with the sandbox's environment.
    expect(r.start_ran).toBe("started\nyes\n");
  });

  it("uploads and downloads 100 MiB through the gateway with matching sha256, and reads windows and tails", async () => {
    const r = await step("files", { id, mib: 100 });
    expect(r.uploaded.success).toBe(true);
    expect(r.uploaded.size).toBe(r.size);
    expect(r.sha_inside).toBe(r.sha_local);
    expect(r.sha_back).toBe(r.sha_local);
    expect(r.whole).toMatchObject({ content: "0123456789abcdefghij", size: 20, total_size: 20, offset: 0, truncated: false });
    expect(r.window).toMatchObject({ content: "5678", size: 4, total_size: 20, offset: 5, truncated: true });
    expect(r.tail).toMatchObject({ content: "efghij", size: 6, total_size: 20, offset: 14, truncated: true });
    expect(r.missing).toBe("SandboxFileNotFoundError");
  });

  it("runs background jobs as the client writes them, polled one by one and in one batch call", async () => {
    const r = await step("jobs", { id });
    expect(r.batch_supported).toBe(true);
    expect(r.first).toHaveLength(2);
    expect(r.quick).toMatchObject({ completed: true, exit_code: 7, stdout: "done-out\n", stderr: "done-err\n" });
    expect(r.slow).toMatchObject({ completed: true, exit_code: 0, stdout: "slow\n" });
    expect(r.ran).toMatchObject({ completed: true, exit_code: 0, stdout: "ran\n" });
  });

  it("lists with pages and label filters, batch-gets statuses, and bulk-deletes by ids and by labels", async () => {
    const r = await step("listing", { image: "sandtree/busybox", label: "batch-x" });
    expect(r.statuses.statuses.map((x: any) => x.sandbox_id)).toEqual(r.ids);
    expect(r.total).toBe(3);
    expect([...r.page1, ...r.page2].sort()).toEqual([...r.ids].sort());
    expect(r.page1).toHaveLength(2);
    expect(r.has_next).toEqual([true, false]);
    expect(r.one).toEqual([r.ids[1]]);
    expect(r.one_labels.sort()).toEqual(["batch-x", "n=1"]);
    expect(r.by_ids.succeeded).toEqual([r.ids[0]]);
    expect(r.by_ids.failed.map((f: any) => f.sandbox_id)).toEqual(["sb-doesnotexist0000"]);
    expect(r.by_labels.succeeded.sort()).toEqual([r.ids[1], r.ids[2]].sort());
    expect(r.left).toBe(0);
  });

  it("refuses what sandtree cannot do by name, never ignoring it", async () => {
    const r = await step("refusals", { image: "sandtree/busybox" });
    expect(r.gpu).toMatch(/^HTTP 400: gpu_count: sandtree sandboxes have no GPUs/);
    expect(r.region).toMatch(/^HTTP 400: region:/);
    expect(r.fractional_cpu).toMatch(/^HTTP 400: cpu_cores: sandtree takes whole numbers/);
    expect(r.team).toMatch(/^HTTP 403: team_id someone-else/);
    // A bulk delete naming no sandbox and no label deletes nothing: it is refused.
    for (const body of [{}, { labels: [] }]) {
      const del = await t.api("DELETE", "/prime/api/v1/sandbox", body);
      expect(del.status, JSON.stringify(del.body)).toBe(400);
    }
    expect((await t.api("GET", `/prime/api/v1/sandbox/${id}`)).body.status).toBe("RUNNING");
  });

  it("refuses another team's key with the client's not-found error", async () => {
    const r = await step("foreign", { id }, foreignEnv);
    expect(r.get).toMatch(/^APIError: HTTP 404: sandbox .* not found/);
    expect(r.exec).toMatch(/^APIError: HTTP 404/);
    expect(r.delete).toMatch(/^APIError: HTTP 404/);
  });

  it("streams a live process over Connect (AsyncSandboxClient): stdout, stdin, stderr, SIGTERM, SIGKILL", async () => {
    const r = await step("session", { id });
    expect(r.exec).toMatchObject({ stdout: "async\n", exit_code: 4 });
    expect(r.pid).toBeGreaterThan(1);
    expect(r.stdout).toEqual(["ready\n", "got:first\n"]);
    expect(r.stderr).toBe("got:second\n");
    expect(r.terminated).toBe(143);
    expect(r.armed).toBe("armed\n");
    expect(r.after_term).toBeNull();
    expect(r.killed).toBe(137);
  });

  it("serves logs and the error context", async () => {
    const r = await step("logs", { id });
    expect(r.logs).toMatch(/running/);
    expect(r.context).toEqual({ status: "RUNNING", error_type: null, error_message: null });
  });

  it("checkpoints, waits for DURABLE, lists, batch-gets and restores into a new sandbox", async () => {
    const r = await step("checkpoints", { id });
    expect(["PENDING", "FROZEN", "DURABLE"]).toContain(r.first_state);
    expect(r.durable.state).toBe("DURABLE");
    expect(r.listed).toContain(r.durable.id);
    expect(r.got_state).toBe("DURABLE");
    expect(r.batch_found).toEqual([r.durable.id]);
    expect(r.batch_errors).toEqual(["NOT_FOUND"]);
    expect(r.child_image).toBe("sandtree/debian:latest");
    expect(r.marker).toBe("kept\n");
  });

  it("binds gateway tokens to one sandbox, one team and a key that is not revoked", async () => {
    const auth = async (key: string): Promise<any> =>
      (
        await fetch(`${env.base}/api/v1/sandbox/${id}/auth`, { method: "POST", headers: { authorization: `Bearer ${key}` } })
      ).json();
    const read = async (token: string, ns: string, sid: string) =>
      (
        await fetch(`${env.base}/gateway/${ns}/${sid}/read-file?path=/etc/hostname`, {
          headers: { authorization: `Bearer ${token}` },
        })
      ).status;
    const a = await auth(t.key);
    expect(a.gateway_url).toBe(`${env.base}/gateway`);
    expect(a.job_id).toBe(id);
    expect(Date.parse(a.expires_at) - Date.now()).toBeLessThanOrEqual(15 * 60_000);
    expect(await read(a.token, a.user_ns, id)).toBe(200);
    expect(await read(a.token, a.user_ns, "sb-aaaaaaaaaaaaaaaa")).toBe(401);
    expect(await read(a.token, "tm-someoneelse", id)).toBe(401);
    expect(await read(`${a.token.slice(0, -2)}xx`, a.user_ns, id)).toBe(401);
    expect(await read("", a.user_ns, id)).toBe(401);
    // The REST exec older clients use, behind the same token.
    const exec = async (body: object) =>
      fetch(`${a.gateway_url}/${a.user_ns}/${id}/exec`, {
        method: "POST",
        headers: { authorization: `Bearer ${a.token}`, "content-type": "application/json" },
        body: JSON.stringify({ sandbox_id: id, env: { V: "rest" }, ...body }),
      });
    const ok = await exec({ command: "echo $V; pwd; echo e >&2; exit 2", working_dir: "/tmp", timeout: 30 });
    expect(await ok.json()).toEqual({ stdout: "rest\n/tmp\n", stderr: "e\n", exit_code: 2 });
    expect((await exec({ command: "sleep 30", timeout: 1 })).status).toBe(408);
    // A key's tokens end with it.
    const extra = await t.api("POST", "/v1/keys", { team: "default" });
    const b = await auth(extra.body.key);
    expect(await read(b.token, b.user_ns, id)).toBe(200);
    expect((await t.api("DELETE", `/v1/keys/${extra.body.id}`)).status).toBe(200);
    expect(await read(b.token, b.user_ns, id)).toBe(401);
  });

  it("deletes the sandbox", async () => {
    const r = await step("delete", { id });
    expect(r.status).toBe("TERMINATED");
  });
});

describe("verifiers (0.4.0, unpatched) on sandtree", () => {
  it("runs rollouts of a fixed policy on its Prime runtime: sandboxes made, used, scored and deleted", async () => {
    // verifiers' default image (python:3.11-slim), through the alias set above.
    const r = await runPrime("vf_rollouts.py", ["", "2"], env);
    expect(r.rollouts).toHaveLength(2);
    for (const [n, x] of r.rollouts.entries()) {
      const i = n + 1;
      expect(x.image).toBe("python:3.11-slim");
      expect(x.task).toBe(`${i}+${i * 10}`);
      expect(x.outputs.map((o: any) => o.exit_code)).toEqual([0, 0]);
      expect(x.outputs[1].stdout).toBe(`${i * 11}\n`);
      expect(x.live).toBe("live:hello\n");
      expect(x.live_exit).toBe(0);
      expect(x.reward).toBe(1);
      expect((await t.api("GET", `/v1/sandboxes/${x.id}`)).body.status).toBe("TERMINATED");
    }
  });
});

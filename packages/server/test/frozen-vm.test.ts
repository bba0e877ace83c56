// A VM whose QEMU is frozen (SIGSTOP: neither QMP nor the guest answers) during each kind of call
// into it: every call comes back with a clear error within its deadline instead of hanging, and
// what the call had started is cleaned up (the VM killed, its sandbox ERROR with the reason, a
// checkpoint FAILED without a layer left). Small deadlines make it quick; no durations are checked.
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../src/index.js";
import { type Api, jsonApi, pollFor, qemuPidsFor } from "./helpers.js";

/** Every deadline of a call into a VM, for this file (the defaults are 10-30 s). */
const DEADLINE_MS = 4000;
const BODY = { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 };
const CASES = ["exec", "read", "checkpoint", "pause", "memory", "deleteRunning", "deletePaused"] as const;

let server: RunningServer;
let api: Api;
let dataDir: string;
const ids = {} as Record<(typeof CASES)[number], string>;
const frozen = new Set<number>();

const waitFor = <T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 60_000) =>
  pollFor(what, fn, timeoutMs, 50);

/** SIGSTOPs the sandbox's QEMU (found by its `-name sandtree-<id>` in the process table). */
function freeze(id: string): number {
  const pid = Number.parseInt(qemuPidsFor([id])[0] ?? "", 10);
  expect(pid).toBeGreaterThan(1);
  process.kill(pid, "SIGSTOP");
  frozen.add(pid);
  return pid;
}

/** The sandbox ends ERROR with a reason naming the deadline, and nothing of its VM is left. */
async function expectFailedAndGone(id: string, reason: RegExp): Promise<void> {
  const sb = await waitFor(`${id} ERROR`, async () => {
    const b = (await api("GET", `/v1/sandboxes/${id}`)).body;
    return b.status === "ERROR" ? b : undefined;
  });
  expect(sb.error_reason).toMatch(reason);
  // Killed because it stopped answering (not counted as a machine that died on its own).
  expect(sb.error_code).toBe("MACHINE_UNRESPONSIVE");
  await expectGone(id);
}

async function expectGone(id: string): Promise<void> {
  await waitFor(`QEMU of ${id} gone`, () => (qemuPidsFor([id]).length === 0 ? true : undefined), 30_000);
  const layers = path.join(dataDir, "layers");
  await waitFor(
    `layers of ${id} removed`,
    () => (readdirSync(layers).some((f) => f.startsWith(`live-${id}-`)) ? undefined : true),
    30_000,
  );
}

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), "sandtree-frozen-"));
  server = await startServer(
    { dataDir, host: "127.0.0.1", port: 0, logger: false, network: "off" },
    { deadlines: { agentMs: DEADLINE_MS, qmpMs: DEADLINE_MS, freezeMs: DEADLINE_MS } },
  );
  const key = server.firstKey ?? "";
  api = jsonApi(server.url, () => key);
  // One VM per case (a frozen VM is killed), booted side by side.
  for (const c of CASES) {
    const r = await api("POST", "/v1/sandboxes", BODY);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    ids[c] = r.body.id;
  }
  await Promise.all(
    Object.values(ids).map((id) =>
      waitFor(
        `${id} RUNNING`,
        async () => {
          const b = (await api("GET", `/v1/sandboxes/${id}`)).body;
          if (["ERROR", "TERMINATED", "TIMEOUT"].includes(b.status)) throw new Error(`${id} ${b.status}: ${b.error_reason}`);
          return b.status === "RUNNING" ? true : undefined;
        },
        240_000,
      ),
    ),
  );
}, 300_000);

afterAll(async () => {
  for (const pid of frozen) {
    try {
      process.kill(pid, "SIGCONT");
      process.kill(pid, "SIGKILL");
    } catch {}
  }
  await server?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
}, 120_000);

describe("a VM frozen with SIGSTOP during a call", () => {
  it("exec: 502 GUEST_ERROR once the liveness deadline kills the VM", { timeout: 120_000 }, async () => {
    const id = ids.exec;
    const running = api("POST", `/v1/sandboxes/${id}/exec`, { command: "touch /tmp/started; sleep 600; echo late" });
    await waitFor("the exec started", async () =>
      (await api("GET", `/v1/sandboxes/${id}/files/stat?path=/tmp/started`)).status === 200 ? true : undefined,
    );
    freeze(id);
    const r = await running;
    expect(r.status, JSON.stringify(r.body)).toBe(502);
    expect(r.body.code).toBe("GUEST_ERROR");
    await expectFailedAndGone(id, /stopped answering/);
    // Later calls are refused at once.
    expect((await api("POST", `/v1/sandboxes/${id}/exec`, { command: "true" })).status).toBe(409);
  });

  it("file read: 502 GUEST_ERROR, the VM killed", { timeout: 120_000 }, async () => {
    const id = ids.read;
    const w = await api("POST", `/v1/sandboxes/${id}/exec`, { command: "head -c 2000000 /dev/urandom > /root/big" });
    expect(w.body.exit_code).toBe(0);
    freeze(id);
    const r = await api("GET", `/v1/sandboxes/${id}/files?path=/root/big`);
    expect(r.status, JSON.stringify(r.body)).toBe(502);
    expect(r.body.code).toBe("GUEST_ERROR");
    await expectFailedAndGone(id, /stopped answering/);
  });

  it("checkpoint: 409 CHECKPOINT_FAILED at the freeze deadline, no layer left, then the VM is killed", {
    timeout: 120_000,
  }, async () => {
    const id = ids.checkpoint;
    freeze(id);
    const r = await api("POST", `/v1/sandboxes/${id}/checkpoints`, {});
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.code).toBe("CHECKPOINT_FAILED");
    expect(r.body.message).toMatch(/did not answer/);
    const ck = (await api("GET", `/v1/checkpoints/${r.body.details.checkpoint_id}`)).body;
    expect(ck.state).toBe("FAILED");
    expect(existsSync(path.join(dataDir, "layers", `live-${id}-${ck.id}.qcow2`))).toBe(false);
    await expectFailedAndGone(id, /stopped answering/);
  });

  it("pause: 502 GUEST_ERROR at the QMP deadline, the sandbox ERROR and its QEMU killed", { timeout: 120_000 }, async () => {
    const id = ids.pause;
    freeze(id);
    const r = await api("POST", `/v1/sandboxes/${id}/pause`);
    expect(r.status, JSON.stringify(r.body)).toBe(502);
    expect(r.body.code).toBe("GUEST_ERROR");
    expect(r.body.message).toMatch(/did not answer a pause/);
    await expectFailedAndGone(id, /did not answer a pause/);
  });

  it("memory save: 409 CHECKPOINT_FAILED at the QMP deadline, the VM killed, no memory file", { timeout: 120_000 }, async () => {
    const id = ids.memory;
    freeze(id);
    const r = await api("POST", `/v1/sandboxes/${id}/checkpoints`, { include_memory: true });
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.code).toBe("CHECKPOINT_FAILED");
    const ckId = r.body.details.checkpoint_id as string;
    expect((await api("GET", `/v1/checkpoints/${ckId}`)).body.state).toBe("FAILED");
    await expectFailedAndGone(id, /did not answer a checkpoint's QMP command/);
    expect(existsSync(path.join(dataDir, "layers", `mem-${ckId}`))).toBe(false);
  });

  it("delete: TERMINATED and the QEMU gone, whether it was RUNNING or PAUSED", { timeout: 120_000 }, async () => {
    const paused = await api("POST", `/v1/sandboxes/${ids.deletePaused}/pause`);
    expect(paused.body.status).toBe("PAUSED");
    for (const id of [ids.deleteRunning, ids.deletePaused]) {
      freeze(id);
      const r = await api("DELETE", `/v1/sandboxes/${id}`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.status).toBe("TERMINATED");
      await expectGone(id);
      expect(existsSync(path.join(dataDir, "sandboxes", id, "disk"))).toBe(false);
    }
  });
});

import { describe, expect, it } from "vitest";
import { type Api, stopChildProcess } from "../helpers.js";
import { ENDED, idsOnWorker, qemuPidsOf, SMALL, twoWorkerFleetForFile, until, type Worker } from "./worker-harness.js";

describe("fleet: a worker that dies", () => {
  let workers: Worker[] = [];
  /** The sandbox on wb, still running after wa was lost. */
  let survivor = "";
  let api: Api;

  const placements = async () => {
    const r = await api("GET", "/v1/hosts");
    return Object.fromEntries(
      (r.body.hosts as Array<{ name: string; usage: { placements: number } }>).map((h) => [h.name, h.usage.placements]),
    );
  };
  const sandbox = async (id: string) => (await api("GET", `/v1/sandboxes/${id}`)).body;
  /** Polls a sandbox until `done` holds for it (or fails after a generous deadline). */
  const untilSandbox = (id: string, done: (s: { status: string }) => boolean, ms = 240_000) =>
    until(
      id,
      () => sandbox(id),
      (s) => done(s),
      { ms, everyMs: 200 },
    );
  const createOn = async (host: string) => {
    const r = await api("POST", "/v1/sandboxes", { ...SMALL, host });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const id = r.body.id as string;
    const s = await untilSandbox(id, (x) => x.status === "RUNNING" || ENDED.includes(x.status));
    expect(s.status, JSON.stringify(s)).toBe("RUNNING");
    return id;
  };

  // Hosts beat every second; one silent for 5 s is LOST (the default bound is 30 s).
  const fleet = twoWorkerFleetForFile(
    () => ({ SANDTREE_HOST_LOST_AFTER_MS: "5000" }),
    (f) => ({ api, workers } = f),
  );

  it("kill -9 of a worker: its sandbox becomes ERROR HOST_LOST and its placement is released; the other runs on", async () => {
    const [wa, wb] = workers as [Worker, Worker];
    const a = await createOn("wa");
    const b = await createOn("wb");
    expect([idsOnWorker(wa).includes(a), idsOnWorker(wb).includes(b)]).toEqual([true, true]);
    expect(await placements()).toMatchObject({ wa: 1, wb: 1, local: 0 });

    fleet().orphans.push(...qemuPidsOf(a));
    expect(fleet().orphans.length).toBe(1);
    await stopChildProcess(wa.proc, "SIGKILL");

    // No timing assertion: poll (generously) until the reaper has marked it.
    const lost = await untilSandbox(a, (x) => ENDED.includes(x.status), 120_000);
    expect(lost).toMatchObject({ status: "ERROR", error_reason: expect.stringMatching(/^HOST_LOST: host wa /) });
    expect(lost.terminated_at).toEqual(expect.any(String));
    const hosts = (await api("GET", "/v1/hosts")).body.hosts as Array<{ name: string; state: string }>;
    expect(hosts.find((h) => h.name === "wa")?.state).toBe("LOST");
    expect(hosts.find((h) => h.name === "wb")?.state).toBe("ACTIVE");
    expect(await placements()).toMatchObject({ wa: 0, wb: 1 });
    // Calls to it are refused with a code, not proxied to a dead worker.
    expect((await api("POST", `/v1/sandboxes/${a}/exec`, { command: "true" })).body.code).toBe("SANDBOX_NOT_RUNNING");

    // The other worker's sandbox is untouched: still RUNNING, still reachable through the control plane.
    expect((await sandbox(b)).status).toBe("RUNNING");
    const ex = await api("POST", `/v1/sandboxes/${b}/exec`, { command: "echo alive" });
    expect([ex.status, ex.body.stdout]).toEqual([200, "alive\n"]);
    // A pin to the lost worker is refused with a code.
    expect((await api("POST", "/v1/sandboxes", { ...SMALL, host: "wa" })).body.code).toMatch(
      /^(HOST_UNSCHEDULABLE|NO_CAPACITY)$/,
    );
    survivor = b;
  }, 600_000);

  it("a worker that comes back after HOST_LOST stops the VMs of the sandboxes marked lost", async () => {
    const wb = workers[1] as Worker;
    const b = survivor;
    const pids = qemuPidsOf(b);
    expect(pids.length).toBe(1);
    // Stopped, not killed: it stops heartbeating while its VM runs on.
    wb.proc.kill("SIGSTOP");
    try {
      const lost = await untilSandbox(b, (x) => ENDED.includes(x.status), 120_000);
      expect(lost).toMatchObject({ status: "ERROR", error_reason: expect.stringMatching(/^HOST_LOST: host wb /) });
      expect(qemuPidsOf(b)).toEqual(pids);
    } finally {
      wb.proc.kill("SIGCONT");
    }
    // Back: its heartbeat makes it ACTIVE again, its host is opened anew and reconciled: b ended, so its VM is stopped.
    await until(
      () => `the VM of ${b} still runs on wb:\n${wb.output()}`,
      async () => qemuPidsOf(b),
      (pids) => pids.length === 0,
      { ms: 120_000, everyMs: 200 },
    );
    const hosts = (await api("GET", "/v1/hosts")).body.hosts as Array<{ name: string; state: string }>;
    expect(hosts.find((h) => h.name === "wb")?.state).toBe("ACTIVE");
    // The record stays what it was: lost, not revived.
    expect(await sandbox(b)).toMatchObject({ status: "ERROR", error_reason: expect.stringMatching(/^HOST_LOST/) });
    expect(await placements()).toMatchObject({ wb: 0 });
    survivor = await createOn("wb");
  }, 600_000);

  it("SIGTERM of a worker: it ends its sandboxes and reports them before it exits", async () => {
    const wb = workers[1] as Worker;
    expect((await sandbox(survivor)).status).toBe("RUNNING");
    await stopChildProcess(wb.proc, "SIGTERM");
    // Read once the worker has exited: its host's shutdown stopped the machine, and that exit reached
    // this control plane over its Watch before the service closed (without it, the row would still
    // be RUNNING, and ERROR HOST_LOST only after the bound).
    const s = await sandbox(survivor);
    expect(s, wb.output()).toMatchObject({ status: "TERMINATED", error_reason: "on host wb: the server shut down" });
    expect(await placements()).toMatchObject({ wb: 0 });
    expect(qemuPidsOf(survivor)).toEqual([]);
  }, 300_000);
});

import { readFileSync } from "node:fs";
import path from "node:path";
import { SandtreeClient } from "@sandtree/sdk";
import { describe, expect, it } from "vitest";
import { type Api, jsonApi, spawnServe, stopChildProcess } from "../helpers.js";
import { ENDED, idsOnWorker, SMALL, twoWorkerFleetForFile, until, type Worker, waitRunning } from "./worker-harness.js";

describe("fleet: sandboxes on workers behind one API", () => {
  let workers: Worker[] = [];
  let api: Api;
  let cpUrl = "";
  let cpDir = "";
  let cpKey = "";

  const hosts = async () => {
    const r = await api("GET", "/v1/hosts");
    expect(r.status).toBe(200);
    return new Map(
      (r.body.hosts as Array<{ name: string; state: string; url: string | null; usage: { placements: number } }>).map((h) => [
        h.name,
        h,
      ]),
    );
  };
  const create = async (extra: Record<string, unknown> = {}) => {
    const r = await api("POST", "/v1/sandboxes", { ...SMALL, ...extra });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.id as string;
  };
  const workerOf = (id: string) => workers.find((w) => idsOnWorker(w).includes(id))?.name ?? null;

  const fleet = twoWorkerFleetForFile(
    () => ({}),
    (f) => ({ api, workers, url: cpUrl, dir: cpDir, key: cpKey } = f),
  );

  it("workers register their URL and answer nobody but the control plane", async () => {
    const h = await hosts();
    expect(h.get("wa")).toMatchObject({ state: "ACTIVE", url: workers[0]?.url });
    expect(h.get("wb")).toMatchObject({ state: "ACTIVE", url: workers[1]?.url });
    expect(h.get("local")).toMatchObject({ state: "CORDONED", url: null });
    // The control plane's admin key is not the worker's: refused, as is no key at all.
    const direct = jsonApi(workers[0]?.url ?? "", () => "st_not-the-call-key");
    expect((await direct("GET", "/v1/sandboxes")).status).toBe(401);
    expect((await fetch(`${workers[0]?.url}/v1/sandboxes`)).status).toBe(401);
  });

  it("spreads creates over the workers; exec and files go through the control plane; cordon and pins hold; deletes free", async () => {
    const a = await create();
    const b = await create();
    await Promise.all([waitRunning(api, a), waitRunning(api, b)]);
    const on = { [a]: workerOf(a), [b]: workerOf(b) };
    expect(new Set(Object.values(on))).toEqual(new Set(["wa", "wb"]));
    let h = await hosts();
    expect([h.get("wa")?.usage.placements, h.get("wb")?.usage.placements, h.get("local")?.usage.placements]).toEqual([1, 1, 0]);

    // Exec, upload and download of a worker's sandbox, through the control plane's API (streamed).
    const ex = await api("POST", `/v1/sandboxes/${a}/exec`, { command: "echo hello && uname -s" });
    expect([ex.status, ex.body.exit_code, ex.body.stdout]).toEqual([200, 0, "hello\nLinux\n"]);
    const payload = new Uint8Array(3 * 1024 * 1024).map((_, i) => (i * 7919) % 251);
    const put = await api("PUT", `/v1/sandboxes/${a}/files?path=/tmp/blob.bin`, payload, {
      "content-type": "application/octet-stream",
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const size = await api("POST", `/v1/sandboxes/${a}/exec`, { command: "wc -c < /tmp/blob.bin" });
    expect(size.body.stdout.trim()).toBe(String(payload.length));
    const dl = await fetch(`${cpUrl}/v1/sandboxes/${a}/files?path=/tmp/blob.bin`, {
      headers: { authorization: `Bearer ${cpKey}` },
    });
    expect(dl.status).toBe(200);
    expect(Buffer.from(await dl.arrayBuffer()).equals(Buffer.from(payload))).toBe(true);

    // A streamed exec is forwarded as it runs: its "started" event arrives while the command waits
    // for stdin, which then goes to the worker through the control plane too (buffering anywhere
    // on the way would hang here, not pass).
    const streamed = await fetch(`${cpUrl}/v1/sandboxes/${a}/exec`, {
      method: "POST",
      headers: { authorization: `Bearer ${cpKey}`, "content-type": "application/json", accept: "application/x-ndjson" },
      body: JSON.stringify({ command: "read line; echo got-$line", stdin_open: true }),
    });
    expect(streamed.status).toBe(200);
    const events: Array<{ type: string; exec_id?: string; data?: string; exit_code?: number }> = [];
    let pending = "";
    const reader = streamed.body?.getReader();
    for (let r = await reader?.read(); r && !r.done; r = await reader?.read()) {
      pending += Buffer.from(r.value).toString("utf8");
      for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n")) {
        const ev = JSON.parse(pending.slice(0, nl));
        pending = pending.slice(nl + 1);
        events.push(ev);
        if (ev.type === "started") {
          const w = await fetch(`${cpUrl}/v1/sandboxes/${a}/execs/${ev.exec_id}/stdin?close=true`, {
            method: "POST",
            headers: { authorization: `Bearer ${cpKey}`, "content-type": "application/octet-stream" },
            body: "hi\n",
          });
          expect(w.status).toBe(204);
        }
      }
    }
    const out = events.filter((e) => e.type === "stdout").map((e) => Buffer.from(e.data ?? "", "base64").toString());
    expect([out.join(""), events.at(-1)?.type, events.at(-1)?.exit_code]).toEqual(["got-hi\n", "exit", 0]);

    // Pause and resume run on the worker; the control plane's record follows.
    const teamId = (await api("GET", `/v1/sandboxes/${b}`)).body.team_id;
    const paused = (await api("POST", `/v1/sandboxes/${b}/pause`)).body;
    // The answer is the control plane's record (its team, its cost), not the worker's.
    expect(paused).toMatchObject({ id: b, status: "PAUSED", team_id: teamId, cost_usd: expect.any(Number) });
    expect((await api("GET", `/v1/sandboxes/${b}`)).body.status).toBe("PAUSED");
    expect((await api("POST", `/v1/sandboxes/${b}/resume`)).body.status).toBe("RUNNING");
    expect((await api("GET", `/v1/sandboxes/${b}`)).body.status).toBe("RUNNING");

    // A delete ends it on its worker and gives its placement back.
    const busy = on[a] as string;
    const idle = on[b] as string;
    expect((await api("DELETE", `/v1/sandboxes/${a}`)).body.status).toBe("TERMINATED");
    h = await hosts();
    expect(h.get(busy)?.usage.placements).toBe(0);
    expect((await api("POST", `/v1/sandboxes/${a}/exec`, { command: "true" })).body.code).toBe("SANDBOX_NOT_RUNNING");

    // A cordoned worker gets none: the next create goes to the other one, though it has more room.
    expect((await api("POST", `/v1/hosts/${idle}/cordon`)).status).toBe(200);
    const c = await create();
    await waitRunning(api, c);
    expect(workerOf(c)).toBe(busy);
    // Its host registered again (as a restarted worker would): a new secret, so a new key for
    // calls into it; the worker learns it at its next heartbeat (refused: it registers again).
    const info = (await api("GET", "/v1/hosts")).body.hosts.find((x: { name: string }) => x.name === busy);
    const token = readFileSync(path.join(cpDir, "join-token"), "utf8").trim();
    const again = await jsonApi(cpUrl, () => token)("POST", "/v1/fleet/hosts/register", {
      name: busy,
      capacity: info.capacity,
      url: info.url,
    });
    expect(again.status).toBe(201);
    const echo = async () => (await api("POST", `/v1/sandboxes/${c}/exec`, { command: "echo ok" })).body.stdout;
    await expect.poll(echo, { timeout: 30_000, interval: 250 }).toBe("ok\n");
    // Pins: refused with a code on a cordoned host, an unknown one, or without an admin key; never moved.
    const pinned = await api("POST", "/v1/sandboxes", { ...SMALL, host: idle });
    expect([pinned.status, pinned.body.code]).toEqual([409, "HOST_UNSCHEDULABLE"]);
    const unknown = await api("POST", "/v1/sandboxes", { ...SMALL, host: "no-such-host" });
    expect([unknown.status, unknown.body.code]).toEqual([404, "HOST_NOT_FOUND"]);
    const member = (await api("POST", "/v1/keys", { team: "default", admin: false })).body.key as string;
    const asMember = await jsonApi(cpUrl, () => member)("POST", "/v1/sandboxes", { ...SMALL, host: busy });
    expect([asMember.status, asMember.body.code]).toEqual([403, "FORBIDDEN"]);
    // Uncordoned, pinned: it lands there.
    expect((await api("POST", `/v1/hosts/${idle}/uncordon`)).status).toBe(200);
    const d = await create({ host: idle });
    await waitRunning(api, d);
    expect(workerOf(d)).toBe(idle);
    expect((await api("POST", `/v1/sandboxes/${d}/exec`, { command: "echo pinned" })).body.stdout).toBe("pinned\n");
    h = await hosts();
    expect([h.get(busy)?.usage.placements, h.get(idle)?.usage.placements]).toEqual([1, 2]);

    // A sandbox that ends on its worker by itself (its VM exits) ends here too, by the heartbeat's report.
    await api("POST", `/v1/sandboxes/${c}/exec`, { command: "reboot -f", timeout_seconds: 5 }).catch(() => {});
    const ended = await until(
      `${c} still running`,
      async () => (await api("GET", `/v1/sandboxes/${c}`)).body,
      (s) => ENDED.includes(s.status),
      { ms: 60_000 },
    );
    expect(ended.status, JSON.stringify(ended)).toMatch(/^(ERROR|TERMINATED)$/);
    await expect.poll(async () => (await hosts()).get(busy)?.usage.placements, { timeout: 10_000 }).toBe(0);

    // Its console and events come from the worker; so does the answer about its ports (these
    // workers run without sandbox networks: fleet-ports.test.ts exposes one with them on).
    const logs = await api("GET", `/v1/sandboxes/${d}/logs`);
    expect(logs.body.events.map((e: { message: string }) => e.message).join("\n")).toMatch(/running \((tcg|kvm), pid \d+\)/);
    const port = await api("POST", `/v1/sandboxes/${d}/ports`, { port: 8080 });
    expect([port.status, port.body.code]).toEqual([409, "NETWORK_DISABLED"]);

    // A terminal (WebSocket) through the control plane to the worker's VM.
    const pty = await new SandtreeClient({ apiUrl: cpUrl, apiKey: cpKey, env: {} }).sandboxes.pty(d, { rows: 24, cols: 80 });
    let text = "";
    const reading = (async () => {
      for await (const chunk of pty.output) text += Buffer.from(chunk).toString("utf8");
    })();
    await pty.write("echo pty-$((6*7))\nexit 3\n");
    expect((await pty.wait()).exit_code).toBe(3);
    await reading;
    expect(text).toContain("pty-42");

    // A restarted control plane (same port, same data dir) keeps the workers' sandboxes: their
    // machines are on the workers, so they are neither lost nor adopted here.
    const f = fleet();
    await stopChildProcess(f.proc, "SIGTERM");
    f.proc = (await spawnServe(cpDir, { env: f.env, port: Number(new URL(cpUrl).port) })).proc;
    expect((await api("GET", `/v1/sandboxes/${d}`)).body.status).toBe("RUNNING");
    expect((await api("POST", `/v1/sandboxes/${d}/exec`, { command: "echo still here" })).body.stdout).toBe("still here\n");

    for (const id of [b, d]) {
      const r = await api("DELETE", `/v1/sandboxes/${id}`);
      expect([r.status, r.body.status]).toEqual([200, "TERMINATED"]);
    }
    h = await hosts();
    expect([h.get("wa")?.usage.placements, h.get("wb")?.usage.placements]).toEqual([0, 0]);
  }, 600_000);
});

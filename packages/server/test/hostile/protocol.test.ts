// The hostile-guest suite, protocol cases (docs/hostile-guests.md): root in a sandbox stops its
// agent and speaks to the host over the agent's own port (impostor.c). Garbage and unknown frames
// are skipped and the sandbox runs on; replies the host cannot trust (output past the credit, a
// deep JSON nesting, TLV bytes for JSON) fail the call with GUEST_ERROR and the sandbox becomes
// ERROR with the reason; a guest that stops answering mid-exec or sends half a frame is failed by
// the liveness watchdog. After each case a neighbour still runs `exec true`, the API answers and
// the server's memory grew less than MEMORY_GROWTH_MAX_MIB. No timings here: bench/hostile.mjs.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestServer } from "../helpers.js";
import {
  buildImpostor,
  createBusybox,
  exec,
  expectHealthy,
  launchImpostor,
  putImpostor,
  settledStatus,
  sleep,
  startHostileServer,
  waitImpostor,
} from "./harness.js";

let t: TestServer;
const ids: Record<string, string> = {};
const HOSTILE = ["spray", "credit", "deep", "tlv", "stall", "loris"] as const;
let rssBefore = 0;

beforeAll(async () => {
  t = await startHostileServer();
  const bin = buildImpostor();
  for (const name of ["neighbour", ...HOSTILE]) ids[name] = await createBusybox(t);
  await Promise.all(Object.values(ids).map((id) => t.waitRunning(id)));
  await Promise.all(HOSTILE.map((name) => putImpostor(t, ids[name] as string, bin)));
  rssBefore = process.memoryUsage().rss;
}, 600_000);

afterAll(async () => {
  await t?.close();
}, 120_000);

/** Launches `serve MODE` in the named sandbox, waits until it holds the port, then runs an exec there. */
async function attackedExec(name: string, mode: string) {
  const id = ids[name] as string;
  await launchImpostor(t, id, `serve ${mode}`);
  await waitImpostor(t, id);
  return exec(t, id, "true");
}

describe("a guest that speaks to the host in place of its agent", () => {
  it("bad magic, oversized lengths, unknown types and streams, a HELLO storm and 8 MiB to unread streams are skipped", {
    timeout: 300_000,
  }, async () => {
    const id = ids.spray as string;
    await launchImpostor(t, id, "spray");
    // Calls wait while the agent is held; the impostor lets it go once it has sent everything.
    let done = false;
    for (let i = 0; i < 600 && !done; i++) {
      const r = await exec(t, id, "test -e /tmp/impostor.done");
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      done = r.body.exit_code === 0;
      if (!done) await sleep(250);
    }
    expect(done).toBe(true);
    const log = await exec(t, id, "cat /tmp/impostor.log; echo still-here");
    expect(log.body.stdout).toBe("still-here\n"); // the impostor reported no error
    expect((await t.api("GET", `/v1/sandboxes/${id}`)).body.status).toBe("RUNNING");
    expect(await expectHealthy(t, ids.neighbour as string, rssBefore)).toEqual([]);
  });

  it("an ERROR with a megabyte message fails that call with a short message; the sandbox runs on", {
    timeout: 300_000,
  }, async () => {
    const r = await attackedExec("spray", "errmsg");
    expect(r.status).toBe(502);
    expect(r.body.code).toBe("GUEST_ERROR");
    expect(String(r.body.message).length).toBeLessThan(2048);
    // The impostor let the agent go after its answer.
    let back = await exec(t, ids.spray as string, "echo back");
    for (let i = 0; i < 50 && back.body.stdout !== "back\n"; i++) {
      await sleep(200);
      back = await exec(t, ids.spray as string, "echo back");
    }
    expect(back.body.stdout).toBe("back\n");
    expect(await expectHealthy(t, ids.neighbour as string, rssBefore)).toEqual([]);
  });

  it("a deeply nested STARTED, TLV bytes for an EXIT: GUEST_ERROR, then the sandbox is ERROR with the reason", {
    timeout: 300_000,
  }, async () => {
    const cases = [
      ["deep", "deep", /STARTED: unexpected shape/],
      ["tlv", "tlv", /EXIT: not JSON/],
    ] as const;
    const outcomes = await Promise.all(
      cases.map(async ([name, mode]) => {
        const r = await attackedExec(name, mode);
        return { r, settled: await settledStatus(t, ids[name] as string) };
      }),
    );
    cases.forEach(([name, , reason], i) => {
      const o = outcomes[i];
      expect(o?.r.status, name).toBe(502);
      expect(o?.r.body.code, name).toBe("GUEST_ERROR");
      expect(o?.settled.status, name).toBe("ERROR");
      expect(o?.settled.reason, name).toMatch(/the guest agent broke the protocol/);
      expect(o?.settled.reason, name).toMatch(reason);
    });
    expect(await expectHealthy(t, ids.neighbour as string, rssBefore)).toEqual([]);
  });

  it("output without end, past its credit, to a reader that does not read: the sandbox is ERROR, the server's memory bounded", {
    timeout: 300_000,
  }, async () => {
    const id = ids.credit as string;
    await launchImpostor(t, id, "serve credit");
    await waitImpostor(t, id);
    // A streaming exec whose answer nobody reads: only the credit stops a guest from filling the host.
    const reader = new AbortController();
    const res = await fetch(`${t.url}/v1/sandboxes/${id}/exec`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.key}`, "content-type": "application/json", accept: "application/x-ndjson" },
      body: JSON.stringify({ command: "true" }),
      signal: reader.signal,
    });
    expect(res.status).toBe(200);
    const settled = await settledStatus(t, id);
    reader.abort();
    expect(settled.status).toBe("ERROR");
    expect(settled.reason).toMatch(
      /the guest agent broke the protocol: exec stream \d+ sent \d+ bytes against a credit of 4194304/,
    );
    expect(await expectHealthy(t, ids.neighbour as string, rssBefore)).toEqual([]);
  });

  it("a guest that stops answering mid-exec, and one that sends half a frame: failed by the watchdog", {
    timeout: 300_000,
  }, async () => {
    const outcomes = await Promise.all(
      (["stall", "loris"] as const).map(async (name) => {
        const r = await attackedExec(name, name);
        return { r, settled: await settledStatus(t, ids[name] as string) };
      }),
    );
    for (const o of outcomes) {
      expect(o.r.status).toBe(502);
      expect(o.r.body.code).toBe("GUEST_ERROR");
      expect(o.settled.status).toBe("ERROR");
      expect(o.settled.reason).toMatch(/guest agent stopped answering/);
    }
    expect(await expectHealthy(t, ids.neighbour as string, rssBefore)).toEqual([]);
  });
});

// What a sandbox's machine leaves on its host, through the real server on the fake host (no VM):
// the host keeps the machine's files under its name; the server has it discard the sockets once
// the machine is gone (deleted, died) and reads its console log by name, also after the end.
import { describe, expect, it, vi } from "vitest";
import { onFakeHost, running } from "./fake-host-life.js";
import type { TestServer } from "./helpers.js";

describe("a sandbox's machine files on its host", () => {
  let t: TestServer;
  const host = onFakeHost({ digestChar: "f", started: (server) => void (t = server) });

  async function created(): Promise<string> {
    const c = await t.api("POST", "/v1/sandboxes", { image: "fake/image" });
    expect(c.status, JSON.stringify(c.body)).toBe(201);
    await running(t, c.body.id);
    return c.body.id as string;
  }

  it("a deleted sandbox: its machine's run directory is discarded, its console log still answers", async () => {
    const id = await created();
    const discard = vi.spyOn(host, "discard");
    try {
      expect((await t.api("DELETE", `/v1/sandboxes/${id}`)).status).toBe(200);
      expect(discard.mock.calls.map((c) => c[0])).toContain(`sandtree-${id}`);
    } finally {
      discard.mockRestore();
    }
    const logs = await t.api("GET", `/v1/sandboxes/${id}/logs`);
    expect(logs.status).toBe(200);
    expect(logs.body.console).toBe(`fake machine sandtree-${id} started\nfake machine sandtree-${id} stopped\n`);
  });

  it("a machine killed under its sandbox: discarded once the sandbox is ERROR; its last console line answers", async () => {
    const id = await created();
    const discard = vi.spyOn(host, "discard");
    try {
      host.machines.get(`sandtree-${id}`)?.forceKill();
      await vi.waitFor(() => expect(discard.mock.calls.map((c) => c[0])).toContain(`sandtree-${id}`), {
        timeout: 5000,
        interval: 10,
      });
    } finally {
      discard.mockRestore();
    }
    expect((await t.api("GET", `/v1/sandboxes/${id}`)).body.status).toBe("ERROR");
    const logs = await t.api("GET", `/v1/sandboxes/${id}/logs?tail_bytes=7`);
    expect([logs.body.console, logs.body.console_truncated]).toEqual(["killed\n", true]);
  });
});

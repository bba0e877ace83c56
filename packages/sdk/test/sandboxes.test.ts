import { describe, expect, it } from "vitest";
import { SandboxFailedError, SandtreeClient, TimeoutError } from "../src/index.js";
import { type FakeServer, fakeServer, sandbox, sendJson } from "./fake-server.js";

// The test's fake server (fakeServer closes it when the test ends).
let server: FakeServer | undefined;

describe("listing", () => {
  it("listAll follows next_cursor and repeats label filters", async () => {
    const pages: Record<string, { ids: string[]; next: string | null }> = {
      "": { ids: ["a", "b"], next: "c1" },
      c1: { ids: ["c"], next: "c2" },
      c2: { ids: [], next: null },
    };
    server = await fakeServer((req, res) => {
      const page = pages[req.url.searchParams.get("cursor") ?? ""];
      if (!page) return sendJson(res, 400, { code: "BAD_REQUEST", message: "bad cursor" });
      sendJson(res, 200, { sandboxes: page.ids.map((id) => sandbox({ id })), next_cursor: page.next });
    });
    const client = new SandtreeClient({ apiUrl: server.url, apiKey: "k" });
    const ids: string[] = [];
    for await (const sb of client.sandboxes.listAll({ status: "RUNNING", labels: { team: "a", env: "x=y" }, limit: 2 }))
      ids.push(sb.id);
    expect(ids).toEqual(["a", "b", "c"]);
    expect(server.requests).toHaveLength(3);
    const q = server.requests[1]?.url.searchParams;
    expect(q?.getAll("label")).toEqual(["team=a", "env=x=y"]);
    expect(q?.get("status")).toBe("RUNNING");
    expect(q?.get("limit")).toBe("2");
    expect(q?.get("cursor")).toBe("c1");
  });

  it("list({host}) asks for one host's sandboxes, and Sandbox.host parses (admin answers carry it)", async () => {
    server = await fakeServer((req, res) =>
      sendJson(res, 200, { sandboxes: [sandbox({ id: "a", host: req.url.searchParams.get("host") })], next_cursor: null }),
    );
    const client = new SandtreeClient({ apiUrl: server.url, apiKey: "k" });
    const page = await client.sandboxes.list({ host: "worker-1" });
    expect(server.requests[0]?.url.searchParams.get("host")).toBe("worker-1");
    expect(page.sandboxes[0]?.host).toBe("worker-1");
    await client.sandboxes.list();
    expect(server.requests[1]?.url.searchParams.has("host")).toBe(false);
  });
});

describe("waitForCreation", () => {
  async function serving(statuses: Array<Record<string, unknown>>) {
    let i = 0;
    server = await fakeServer((_req, res) => sendJson(res, 200, sandbox(statuses[Math.min(i++, statuses.length - 1)])));
    return new SandtreeClient({ apiUrl: server.url, apiKey: "k" });
  }

  it("polls until RUNNING and reports progress", async () => {
    const client = await serving([{ status: "PENDING" }, { status: "PROVISIONING" }, { status: "RUNNING" }]);
    const seen: string[] = [];
    const sb = await client.sandboxes.waitForCreation("sb_1", { intervalMs: 5, onProgress: (s) => seen.push(s.status) });
    expect(sb.status).toBe("RUNNING");
    expect(seen).toEqual(["PENDING", "PROVISIONING", "RUNNING"]);
  });

  it("throws SandboxFailedError with the error_reason", async () => {
    const client = await serving([{ status: "PROVISIONING" }, { status: "ERROR", error_reason: "kernel panic" }]);
    const err = await client.sandboxes.waitForCreation("sb_1", { intervalMs: 5 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxFailedError);
    expect(err).toMatchObject({ code: "SANDBOX_ERROR", status: "ERROR", errorReason: "kernel panic" });
    expect((err as Error).message).toMatch(/kernel panic/);
  });

  it("throws a TimeoutError (not a failure) when time runs out", async () => {
    const client = await serving([{ status: "PROVISIONING" }]);
    const err = await client.sandboxes.waitForCreation("sb_1", { intervalMs: 20, timeoutMs: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TimeoutError);
    expect((err as Error).message).toMatch(/still PROVISIONING/);
  });

  it("stops when the signal aborts", async () => {
    const client = await serving([{ status: "PENDING" }]);
    const ctrl = new AbortController();
    setTimeout(() => ctrl.abort(new Error("stop")), 50);
    await expect(client.sandboxes.waitForCreation("sb_1", { intervalMs: 10, signal: ctrl.signal })).rejects.toThrow("stop");
  });
});

// A download declares the file's size (content-length) before the guest reads it: a file
// rewritten in place in between (`echo $i > f` truncates, then writes) sends fewer bytes than
// declared. Before, such a reply ended short on a kept-alive connection and the client waited for
// the rest until its own timeout (a one-off of the e2b SDK test: files.read, 60 s, TimeoutError).
// Through the real server on the fake host (no VM), the file changed between the stat and the read.
import type { FakeMachine } from "@sandtree/host/fake";
import { afterEach, describe, expect, it, vi } from "vitest";
import { onFakeHost, running } from "./fake-host-life.js";
import type { TestServer } from "./helpers.js";

const FILE = "/tmp/count";

describe("a download of a file that changes while it is read", () => {
  let t: TestServer;
  const host = onFakeHost({ digestChar: "8", started: (server) => void (t = server) });
  afterEach(() => void vi.restoreAllMocks());

  async function sandbox(content: string): Promise<{ id: string; machine: FakeMachine }> {
    const c = await t.api("POST", "/v1/sandboxes", { image: "fake/image" });
    expect(c.status, JSON.stringify(c.body)).toBe(201);
    const id = c.body.id as string;
    await running(t, id);
    const machine = host.machines.get(`sandtree-${id}`);
    if (!machine) throw new Error(`no machine for ${id}`);
    machine.files.write(FILE, Buffer.from(content), false);
    return { id, machine };
  }

  /** After the stat that sizes the reply answers, the file becomes `next` (`sizeDelta` added to the size answered). */
  function changeAfterStat(machine: FakeMachine, next: string, sizeDelta = 0): void {
    const stat = machine.stat.bind(machine);
    vi.spyOn(machine, "stat").mockImplementation(async (p) => {
      const st = await stat(p);
      machine.files.write(FILE, Buffer.from(next), false);
      return { ...st, size: st.size + sizeDelta };
    });
  }

  // A client that gives up long after the server should have answered: the hang is the failure.
  const get = (url: string, headers: Record<string, string>) => fetch(url, { headers, signal: AbortSignal.timeout(20_000) });
  const v1 = (id: string) => get(`${t.url}/v1/sandboxes/${id}/files?path=${FILE}`, { authorization: `Bearer ${t.key}` });

  it("emptied before its first byte went: 409 CONFLICT, on /v1 and on E2B's /files", async () => {
    const { id, machine } = await sandbox("41\n");
    changeAfterStat(machine, "");
    const res = await v1(id);
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ code: "CONFLICT", message: expect.stringMatching(/changed while it was read/) });

    const token = (await t.api("POST", `/e2b/v2/sandboxes/${id}/connect`, {}, { "x-api-key": t.key })).body.envdAccessToken;
    machine.files.write(FILE, Buffer.from("42\n"), false);
    const e2b = await get(`${t.url}/e2b/files?path=${FILE}`, { "e2b-sandbox-id": id, "x-access-token": String(token) });
    expect(e2b.status).toBe(409);
    expect(await e2b.json()).toEqual({ code: 409, message: expect.stringMatching(/^CONFLICT: .*changed while it was read/) });
    vi.restoreAllMocks();
    expect(await (await v1(id)).text()).toBe("");
  });

  it("shorter than its size after the first bytes went: the connection is cut, and the next read is answered", async () => {
    const { id, machine } = await sandbox("1234\n");
    changeAfterStat(machine, "1234\n", 5);
    const res = await v1(id);
    expect([res.status, res.headers.get("content-length")]).toEqual([200, "10"]);
    await expect(res.text()).rejects.toMatchObject({ name: "TypeError", message: "terminated" });
    vi.restoreAllMocks();
    expect(await (await v1(id)).text()).toBe("1234\n");
  });

  it("grown since its size was taken: exactly the bytes the size said, and the connection goes on", async () => {
    const { id, machine } = await sandbox("99\n");
    changeAfterStat(machine, "100\n");
    const res = await v1(id);
    expect([res.status, res.headers.get("content-length"), await res.text()]).toEqual([200, "3", "100"]);
    vi.restoreAllMocks();
    expect(await (await v1(id)).text()).toBe("100\n");
  });
});

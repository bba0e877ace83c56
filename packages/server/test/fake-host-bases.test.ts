// A checkpoint names its image base (the image's digest, the same on every host), never a host's
// path; a row from before names (a path) is still restored: the server resolves its image again and
// records the name, giving the host no path. Through the real server on the fake host (no VM).
import { describe, expect, it } from "vitest";
import { exec, onFakeHost, running } from "./fake-host-life.js";
import type { TestServer } from "./helpers.js";

const DIGEST = `sha256:${"9".repeat(64)}`;

describe("a checkpoint's image base, by name", () => {
  let t: TestServer;
  const host = onFakeHost({ digestChar: "9", started: (server) => void (t = server) });

  async function durable(id: string) {
    for (;;) {
      const r = await t.api("GET", `/v1/checkpoints/${id}`);
      if (r.body.state === "DURABLE") return;
      expect(r.body.state).toBe("FROZEN");
      await new Promise((res) => setTimeout(res, 20));
    }
  }

  it("records the base's name, and restores a row that holds a path by resolving the image again", async () => {
    const created = await t.api("POST", "/v1/sandboxes", { image: "fake/image" });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await running(t, created.body.id);
    await exec(t, created.body.id, "echo kept > /root/n");
    const ck = await t.api("POST", `/v1/sandboxes/${created.body.id}/checkpoints`, {});
    expect(ck.status, JSON.stringify(ck.body)).toBe(201);
    await durable(ck.body.id);
    expect((await t.server.store.getCheckpoint(ck.body.id))?.base).toBe(DIGEST);

    // As a row written before names could hold (a path not in an image store, kept by the migration).
    await t.server.store.updateCheckpoint(ck.body.id, { base: "/var/old-host/images/base.img" });
    const linked: string[] = [];
    const linkBase = host.linkBase.bind(host);
    host.linkBase = async (base) => {
      linked.push(base);
      return linkBase(base);
    };
    const restored = await t.api("POST", "/v1/sandboxes", { checkpoint_id: ck.body.id });
    expect(restored.status, JSON.stringify(restored.body)).toBe(201);
    await running(t, restored.body.id);
    expect((await exec(t, restored.body.id, "cat /root/n")).stdout).toBe("kept\n");
    expect((await t.server.store.getCheckpoint(ck.body.id))?.base).toBe(DIGEST);
    expect(linked.length).toBeGreaterThan(0);
    expect(linked.every((b) => b === DIGEST)).toBe(true);
    for (const s of [restored.body.id, created.body.id]) expect((await t.api("DELETE", `/v1/sandboxes/${s}`)).status).toBe(200);
  });
});

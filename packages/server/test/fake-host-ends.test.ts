// Why a sandbox ended, as the stable `error_code` beside `error_reason`, through the real server
// on the fake host (no VM): a guest that powers off is GUEST_RESET, a machine killed under it is
// MACHINE_EXITED, a start that fails is START_FAILED; a live or deleted sandbox has none.
import { describe, expect, it } from "vitest";
import type { ImageResolver } from "../src/services/images/image-resolver.js";
import { exec, onFakeHost, running } from "./fake-host-life.js";
import type { TestServer } from "./helpers.js";

/** `fake/broken` passes the create's check, then its base cannot be made (the start fails). */
const breaking = (fake: ImageResolver): ImageResolver => ({
  ...fake,
  resolve: (ref, opts) =>
    ref === "fake/broken" ? Promise.reject(new Error("the image's base could not be built")) : fake.resolve(ref, opts),
});

describe("error_code: why a sandbox ended in ERROR", () => {
  let t: TestServer;
  const host = onFakeHost({ digestChar: "e", images: breaking, started: (server) => void (t = server) });

  async function created(): Promise<string> {
    const c = await t.api("POST", "/v1/sandboxes", { image: "fake/image" });
    expect(c.status, JSON.stringify(c.body)).toBe(201);
    expect(c.body.error_code).toBeNull();
    await running(t, c.body.id);
    return c.body.id as string;
  }

  async function ended(id: string): Promise<{ status: string; error_code: string | null; error_reason: string | null }> {
    for (let i = 0; i < 500; i++) {
      const r = await t.api("GET", `/v1/sandboxes/${id}`);
      if (!["PENDING", "PROVISIONING", "RUNNING"].includes(r.body.status)) return r.body;
      await new Promise((res) => setTimeout(res, 10));
    }
    throw new Error(`${id} still RUNNING`);
  }

  it("a guest that powers off: GUEST_RESET", async () => {
    const id = await created();
    expect((await t.api("GET", `/v1/sandboxes/${id}`)).body.error_code).toBeNull();
    await exec(t, id, "poweroff");
    const sb = await ended(id);
    expect(sb).toMatchObject({ status: "ERROR", error_code: "GUEST_RESET", error_reason: "the guest powered off" });
  });

  it("a machine killed under its sandbox: MACHINE_EXITED", async () => {
    const id = await created();
    const machine = [...host.machines.values()].find((m) => m.name.endsWith(id));
    expect(machine, "the sandbox's machine").toBeDefined();
    machine?.forceKill();
    const sb = await ended(id);
    expect(sb).toMatchObject({ status: "ERROR", error_code: "MACHINE_EXITED", error_reason: "killed" });
  });

  it("a start that fails: START_FAILED", async () => {
    const c = await t.api("POST", "/v1/sandboxes", { image: "fake/broken" });
    expect(c.status, JSON.stringify(c.body)).toBe(201);
    const sb = await ended(c.body.id);
    expect(sb.status).toBe("ERROR");
    expect(sb.error_code).toBe("START_FAILED");
    expect(sb.error_reason).toContain("could not be built");
  });

  it("a deleted sandbox: TERMINATED, no code", async () => {
    const id = await created();
    expect((await t.api("DELETE", `/v1/sandboxes/${id}`)).status).toBe(200);
    const sb = (await t.api("GET", `/v1/sandboxes/${id}`)).body;
    expect(sb.status).toBe("TERMINATED");
    expect(sb.error_code).toBeNull();
  });
});

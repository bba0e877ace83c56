import { describe, expect, it } from "vitest";
import { cli, recorded } from "./stub-cli.js";

/** A stub whose waitForCreation answers RUNNING, or throws for the ids in `fail`. */
function waiting(calls: unknown[], fail: string[] = []) {
  return async (id: string, opts: { timeoutMs?: number }) => {
    calls.push(["wait", id, opts.timeoutMs]);
    if (fail.includes(id)) throw new Error(`sandbox ${id} ended ERROR: boot failed`);
    return { id, status: "RUNNING" };
  };
}

/** A stub whose create answers `id` PENDING (recording the request) and whose waitForCreation answers RUNNING. */
function creatingThenRunning(calls: unknown[], id: string) {
  return {
    sandboxes: {
      create: async (req: unknown) => recorded(calls, req, { id, status: "PENDING" }),
      waitForCreation: waiting(calls),
    },
  };
}

describe("CLI parity with the SDK's training workflows (#16 item 4)", () => {
  it("create takes --secret, --timeout-minutes and --idle-timeout-minutes", async () => {
    const calls: unknown[] = [];
    const r = await cli(
      [
        "sandbox",
        "create",
        "sandtree/debian",
        "--secret",
        "TOKEN=s3=cr3t",
        "--secret",
        "B=2",
        "--timeout-minutes",
        "90",
        "--idle-timeout-minutes",
        "2.5",
      ],
      { sandboxes: { create: async (req: unknown) => recorded(calls, req, { id: "sb_1", status: "PENDING" }) } },
    );
    expect(r).toMatchObject({ code: 0, out: "sb_1\n" });
    expect(calls).toEqual([
      { image: "sandtree/debian", secrets: { TOKEN: "s3=cr3t", B: "2" }, timeout_minutes: 90, idle_timeout_minutes: 2.5 },
    ]);
  });

  it("create --host pins the sandbox to a fleet host", async () => {
    const calls: unknown[] = [];
    const r = await cli(["sandbox", "create", "sandtree/busybox", "--host", "w1"], {
      sandboxes: { create: async (req: unknown) => recorded(calls, req, { id: "sb_h", status: "PENDING" }) },
    });
    expect(r).toMatchObject({ code: 0, out: "sb_h\n" });
    expect(calls).toEqual([{ image: "sandtree/busybox", host: "w1" }]);
  });

  it("create --checkpoint restores a checkpoint instead of an image, and --wait waits for RUNNING", async () => {
    const calls: unknown[] = [];
    const client = creatingThenRunning(calls, "sb_2");
    const r = await cli(
      ["sandbox", "create", "--checkpoint", "cp_1", "--timeout-minutes", "5", "--wait", "--wait-timeout", "7"],
      client,
    );
    expect(r).toMatchObject({ code: 0, out: "sb_2\n" });
    expect(calls).toEqual([{ checkpoint_id: "cp_1", timeout_minutes: 5 }, ["wait", "sb_2", 7000]]);
  });

  it("create wants exactly one of an image and --checkpoint", async () => {
    const neither = await cli(["sandbox", "create"]);
    expect(neither).toMatchObject({ code: 2, err: expect.stringMatching(/^error: USAGE: give an image or --checkpoint/) });
    const both = await cli(["sandbox", "create", "img", "--checkpoint", "cp_1"]);
    expect(both.code).toBe(2);
    const disk = await cli(["sandbox", "create", "--checkpoint", "cp_1", "--disk-size-gb", "2"]);
    expect(disk).toMatchObject({ code: 2, err: expect.stringMatching(/--disk-size-gb comes from the checkpoint/) });
    const bad = await cli(["sandbox", "create", "img", "--secret", "nokey"]);
    expect(bad.code).toBe(2);
  });

  it("fork --wait (one child or --count N) waits for every child to be RUNNING", async () => {
    const calls: unknown[] = [];
    const client = {
      sandboxes: {
        fork: async (id: string) => recorded(calls, ["fork", id], { id: "sb_c1", status: "PENDING" }),
        forkMany: async (id: string, n: number) =>
          recorded(calls, ["forkMany", id, n], { checkpoint_id: "cp", sandboxes: [{ id: "sb_c2" }, { id: "sb_c3" }] }),
        waitForCreation: waiting(calls),
      },
    };
    expect(await cli(["sandbox", "fork", "sb_1", "--wait"], client)).toMatchObject({ code: 0, out: "sb_c1\n" });
    expect(await cli(["sandbox", "fork", "sb_1", "--count", "2", "--wait", "--wait-timeout", "9"], client)).toMatchObject({
      code: 0,
      out: "sb_c2\nsb_c3\n",
    });
    expect(calls).toEqual([
      ["fork", "sb_1"],
      ["wait", "sb_c1", 300_000],
      ["forkMany", "sb_1", 2],
      ["wait", "sb_c2", 9000],
      ["wait", "sb_c3", 9000],
    ]);
    // Without --wait nothing waits.
    calls.length = 0;
    await cli(["sandbox", "fork", "sb_1"], client);
    expect(calls).toEqual([["fork", "sb_1"]]);
  });

  it("checkpoint restore --wait waits for RUNNING", async () => {
    const calls: unknown[] = [];
    const client = creatingThenRunning(calls, "sb_r");
    expect(await cli(["sandbox", "checkpoint", "restore", "cp_1", "--wait"], client)).toMatchObject({ code: 0, out: "sb_r\n" });
    expect(calls).toEqual([{ checkpoint_id: "cp_1" }, ["wait", "sb_r", 300_000]]);
  });

  it("sandbox wait ID... prints the RUNNING ones and exits 1 naming the one that failed", async () => {
    const calls: unknown[] = [];
    const client = { sandboxes: { waitForCreation: waiting(calls, ["sb_b"]) } };
    const ok = await cli(["sandbox", "wait", "sb_a", "sb_c", "--wait-timeout", "3"], client);
    expect(ok).toMatchObject({ code: 0, out: "sb_a\nsb_c\n" });
    const failed = await cli(["sandbox", "wait", "sb_a", "sb_b", "sb_c"], client);
    expect(failed.code).toBe(1);
    expect(failed.out).toBe("sb_a\nsb_c\n");
    expect(failed.err).toMatch(/sb_b ended ERROR: boot failed/);
    const json = await cli(["sandbox", "wait", "sb_a", "-o", "json"], client);
    expect(JSON.parse(json.out)).toEqual([{ id: "sb_a", status: "RUNNING" }]);
    const none = await cli(["sandbox", "wait"], client);
    expect(none.code).toBe(2);
  });
});

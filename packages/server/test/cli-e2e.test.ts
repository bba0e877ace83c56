import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runCli, serverForFile, tempDirForFile } from "./helpers.js";

const t = serverForFile();
const work = tempDirForFile("sandtree-cli-");

const sandtree = (args: string[]) => runCli(t, args);

describe("the sandtree CLI against a real server", () => {
  it("creates, runs with exit codes and separate streams, moves files, lists and deletes", { timeout: 300_000 }, async () => {
    const created = await sandtree([
      "sandbox",
      "create",
      "sandtree/busybox",
      "--memory-gb",
      "0.25",
      "--disk-size-gb",
      "1",
      "--label",
      "cli=yes",
      "--env",
      "FOO=bar",
      "--wait",
      "-o",
      "json",
    ]);
    expect(created.code, created.stderr).toBe(0);
    const sb = JSON.parse(created.stdout);
    expect(sb.status).toBe("RUNNING");

    const run = await sandtree([
      "sandbox",
      "run",
      sb.id,
      "-e",
      "X=1",
      "-w",
      "/tmp",
      "--",
      "sh",
      "-c",
      'echo "$FOO$X $(pwd)"; echo oops >&2; exit 3',
    ]);
    expect(run.code).toBe(3);
    expect(run.stdout).toBe("bar1 /tmp\n");
    expect(run.stderr).toBe("oops\n");

    writeFileSync(path.join(work, "up.txt"), "payload\n");
    expect((await sandtree(["sandbox", "upload", sb.id, path.join(work, "up.txt"), "/root/up.txt"])).code).toBe(0);
    expect((await sandtree(["sandbox", "download", sb.id, "/root/up.txt", path.join(work, "down.txt")])).code).toBe(0);
    expect(readFileSync(path.join(work, "down.txt"), "utf8")).toBe("payload\n");

    // -o json prints the API's answer; an admin key sees (and filters by) each sandbox's host.
    const list = await sandtree(["sandbox", "list", "--label", "cli=yes", "--host", "local", "-o", "json"]);
    expect(JSON.parse(list.stdout)).toEqual({
      sandboxes: [expect.objectContaining({ id: sb.id, host: "local" })],
      next_cursor: null,
    });
    expect((await sandtree(["sandbox", "get", sb.id])).stdout).toMatch(/^host: +local$/m);
    expect((await sandtree(["sandbox", "list", "--label", "cli=yes"])).stdout).toMatch(/\bHOST\b[\s\S]*\blocal\b/);
    expect((await sandtree(["sandbox", "logs", sb.id])).code).toBe(0);

    const missing = await sandtree(["sandbox", "get", "sb-nope"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("SANDBOX_NOT_FOUND");

    const ck = await sandtree(["sandbox", "checkpoint", "create", sb.id, "--wait"]);
    expect(ck.code, ck.stderr).toBe(0);
    const cid = ck.stdout.trim();
    const listed = await sandtree(["sandbox", "checkpoint", "list", sb.id, "-o", "json"]);
    expect(JSON.parse(listed.stdout).checkpoints[0]).toMatchObject({ id: cid, state: "DURABLE" });
    const forked = await sandtree(["sandbox", "fork", sb.id, "--memory-gb", "0.25", "-y"]);
    expect(forked.code, forked.stderr).toBe(0);
    const childId = forked.stdout.trim();
    const restored = await sandtree(["sandbox", "checkpoint", "restore", cid, "--memory-gb", "0.25", "--wait", "-y"]);
    expect(restored.code, restored.stderr).toBe(0);
    const fromCk = restored.stdout.trim();
    await t.waitRunning(childId);
    for (const child of [childId, fromCk]) {
      const cat = await sandtree(["sandbox", "run", child, "--", "cat", "/root/up.txt"]);
      expect(cat.stdout).toBe("payload\n");
    }
    expect((await sandtree(["sandbox", "delete", childId, fromCk, "-y"])).code).toBe(0);

    // Pause and resume, memory checkpoints, memory forks of several children, reset in place.
    expect((await sandtree(["sandbox", "pause", sb.id])).stdout).toBe(`${sb.id}\n`);
    expect(JSON.parse((await sandtree(["sandbox", "resume", sb.id, "-o", "json"])).stdout).status).toBe("RUNNING");
    const memCk = await sandtree(["sandbox", "checkpoint", "create", sb.id, "--memory", "--wait", "-o", "json"]);
    expect(JSON.parse(memCk.stdout)).toMatchObject({ state: "DURABLE", has_memory: true });
    const kids = await sandtree(["sandbox", "fork", sb.id, "--memory", "--count", "2", "-y"]);
    expect(kids.code, kids.stderr).toBe(0);
    const kidIds = kids.stdout.trim().split("\n");
    expect(kidIds).toHaveLength(2);
    const reset = await sandtree(["sandbox", "reset", sb.id, "--checkpoint", JSON.parse(memCk.stdout).id]);
    expect(reset.code, reset.stderr).toBe(0);
    expect(reset.stdout.trim()).toBe(sb.id);
    expect((await sandtree(["sandbox", "run", sb.id, "--", "cat", "/root/up.txt"])).stdout).toBe("payload\n");
    expect((await sandtree(["sandbox", "delete", ...kidIds, "-y"])).code).toBe(0);
    expect((await sandtree(["sandbox", "checkpoint", "delete", cid])).code).toBe(2);
    expect((await sandtree(["sandbox", "delete", sb.id, "-y"])).code).toBe(0);
    const after = await sandtree(["sandbox", "run", sb.id, "--", "true"]);
    expect(after.code).toBe(1);
    expect(after.stderr).toContain("SANDBOX_NOT_RUNNING");
  });

  it("lists images as a table and as JSON", async () => {
    const json = await sandtree(["image", "list", "-o", "json"]);
    expect(json.code).toBe(0);
    const refs = JSON.parse(json.stdout).images.map((i: { ref: string }) => i.ref);
    expect(refs.some((r: string) => r.startsWith("sandtree/busybox"))).toBe(true);
    const unknown = await sandtree(["sandbox", "create", "sandtree/nope"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("IMAGE_NOT_FOUND");
  });

  it("aliases an image name, lists the aliases and removes one", async () => {
    const set = await sandtree(["image", "alias", "base", "sandtree/busybox"]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toBe("base:latest -> sandtree/busybox:latest\n");
    const table = await sandtree(["image", "aliases"]);
    expect(table.stdout).toMatch(/^NAME\s+IMAGE\s+AGE\nbase:latest\s+sandtree\/busybox:latest\s/);
    const json = await sandtree(["image", "aliases", "-o", "json"]);
    expect(JSON.parse(json.stdout).aliases.map((a: { name: string }) => a.name)).toEqual(["base:latest"]);
    const removed = await sandtree(["image", "unalias", "base"]);
    expect(removed.code).toBe(0);
    expect(removed.stdout).toBe("base\n");
    const gone = await sandtree(["image", "unalias", "base"]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain("NOT_FOUND");
  });
});

import { spawn } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { SandtreeClient } from "@sandtree/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../server/test/helpers.js";
import { bestOfN, type Environment, type Episode, EpisodeRunner, LABEL, replay, Trajectory, treeSearch } from "../src/index.js";

const ENV: Environment = { image: "sandtree/busybox", setup: ["echo 0 > /root/score"], verifier: "cat /root/score" };
const ACTIVE = ["PENDING", "PROVISIONING", "RUNNING"];
const add = (k: number) => `echo $(( $(cat /root/score) + ${k} )) > /root/score; cat /root/score`;

let t: TestServer;
let client: SandtreeClient;
let runner: EpisodeRunner;

/** The rewards of a tree's nodes at `depth`, sorted. */
function rewardsAt(tree: { level(depth: number): Array<{ reward: number | null }> }, depth: number): Array<number | null> {
  return tree
    .level(depth)
    .map((n) => n.reward)
    .sort();
}

async function active(c: SandtreeClient, name: string): Promise<string[]> {
  const page = await c.sandboxes.list({ labels: { [LABEL]: name } });
  return page.sandboxes.filter((s) => ACTIVE.includes(s.status)).map((s) => s.id);
}

beforeAll(async () => {
  t = await startTestServer();
  client = new SandtreeClient({ apiUrl: t.url, apiKey: t.key });
  runner = await EpisodeRunner.start(client, ENV, { name: "ts-rl", concurrency: 2 });
});
afterAll(async () => {
  await runner?.close();
  await t?.close();
});

describe("@sandtree/rl against a real server and busybox VMs", () => {
  it("cleans up after a policy throws, and records the failure in run()", async () => {
    const seen: string[] = [];
    const boom = async (ep: Episode) => {
      seen.push(ep.sandboxId);
      await ep.run(add(1));
      throw new Error("policy bug");
    };
    await expect(runner.runEpisode(boom)).rejects.toThrow("policy bug");
    expect((await client.sandboxes.get(seen[0] ?? "")).status).toBe("TERMINATED");
    const results = await runner.run((ep) => (ep.id.endsWith("-0") ? ep.run(add(2)) : boom(ep)), 2);
    expect(results[0]?.error).toBeUndefined();
    expect(results[0]?.reward).toBe(2);
    expect(String(results[1]?.error)).toBe("Error: policy bug");
    expect(results[1]?.reward).toBeUndefined();
    expect(await active(client, "ts-rl")).toEqual([]);
  });

  it("exports trajectories as JSONL and replays the last steps with the same outputs", async () => {
    const tr = await runner.withEpisode(async (ep) => {
      await ep.writeFile("/root/note", "from the policy\n");
      await ep.run(add(2));
      await ep.checkpoint();
      await ep.run(add(5));
      await ep.run("cat /root/note; ls /root");
      expect(await ep.score()).toBe(7);
      return ep.trajectory;
    });
    const back = Trajectory.fromJsonl(tr.toJsonl());
    expect(back.events.map((e) => e.type)).toEqual([
      "fork",
      "file_write",
      "command",
      "checkpoint",
      "command",
      "command",
      "verify",
    ]);
    const line = JSON.parse(tr.toJsonl().split("\n")[2] ?? "{}");
    expect(line.exit_code).toBe(0);
    expect(line.stdout_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(line.ended_at).toBeGreaterThanOrEqual(line.started_at);

    const near = await replay(runner, back, 2);
    expect(near.checkpointId).toBe(back.events[3]?.checkpoint_id);
    expect(near.replayed.map((e) => e.command)).toEqual([add(5), "cat /root/note; ls /root"]);
    expect(near.matches).toBe(true);
    const far = await replay(runner, back, 3);
    expect(far.checkpointId).toBe(runner.checkpointId);
    expect(far.matches).toBe(true);
    expect(far.replayed).toHaveLength(3);
  });

  it("best-of-N forks a decision point, scores each branch and keeps the best", async () => {
    const result = await runner.withEpisode(async (ep) => {
      await ep.run(add(1));
      const r = await bestOfN(runner, ep, [add(1), add(4)]);
      // The decision point itself is untouched by its branches.
      expect(await ep.score()).toBe(1);
      return r;
    });
    expect(result.branches.map((b) => b.reward)).toEqual([2, 5]);
    expect(result.best.action).toBe(add(4));
    expect(result.best.episode.trajectory.events.slice(-3).map((e) => e.type)).toEqual(["fork", "command", "verify"]);
    expect(await active(client, "ts-rl")).toEqual([]);
  });

  it("tree search expands the best nodes level by level", async () => {
    const tree = await treeSearch(runner, () => [add(1), add(3)], { depth: 2, width: 1 });
    expect([0, 1, 2].map((d) => tree.level(d).length)).toEqual([1, 2, 2]);
    expect(rewardsAt(tree, 1)).toEqual([1, 3]);
    const best1 = tree.level(1).find((n) => n.reward === 3);
    expect(new Set(tree.level(2).map((n) => n.parent))).toEqual(new Set([best1?.id]));
    expect(rewardsAt(tree, 2)).toEqual([4, 6]);
    expect(tree.best.reward).toBe(6);
    expect(tree.best.path).toEqual([add(3), add(3)]);
    expect(best1?.checkpointId).toBeTruthy();
    expect(await active(client, "ts-rl")).toEqual([]);
  });

  it("reset mode reuses one sandbox, reset in place between episodes", async () => {
    const r = await EpisodeRunner.start(client, ENV, { name: "ts-rl-reset", mode: "reset", concurrency: 1 });
    try {
      const results = await r.run((ep) => ep.run(add(3)), 2);
      expect(results.map((x) => x.reward)).toEqual([3, 3]);
      expect(results.map((x) => x.trajectory.events[0]?.type)).toEqual(["reset", "reset"]);
      expect(results[0]?.trajectory.events[0]?.sandbox_id).toBe(results[1]?.trajectory.events[0]?.sandbox_id);
    } finally {
      await r.close();
    }
    expect(await active(client, "ts-rl-reset")).toEqual([]);
  });

  it("a SIGKILLed runner's sandboxes are swept by the next runner of that name", async () => {
    const worker = path.join(path.dirname(fileURLToPath(import.meta.url)), "rl-worker.mjs");
    const child = spawn(process.execPath, [worker, t.url, t.key, "ts-rl-killed"], { stdio: ["ignore", "pipe", "inherit"] });
    let orphan = "";
    try {
      const lines = createInterface({ input: child.stdout });
      const [line] = (await once(lines, "line")) as [string];
      expect(line).toMatch(/^episode /);
      orphan = line.split(" ")[1] ?? "";
      child.kill("SIGKILL");
      await once(child, "exit");
    } finally {
      child.kill("SIGKILL");
    }
    expect(child.signalCode).toBe("SIGKILL");
    expect((await client.sandboxes.get(orphan)).status).toBe("RUNNING"); // nobody cleaned up
    const next = await EpisodeRunner.start(client, ENV, { name: "ts-rl-killed" });
    try {
      expect((await client.sandboxes.get(orphan)).status).toBe("TERMINATED"); // the start sweep
    } finally {
      await next.close();
    }
    expect(await active(client, "ts-rl-killed")).toEqual([]);
  });

  it("paces creation under a low quota: no 429 reaches the caller", async () => {
    expect((await t.api("POST", "/v1/teams", { name: "ts-rl-quota" })).status).toBe(201);
    const limits = { max_active_sandboxes: 2, max_creations_per_10s: 2 };
    expect((await t.api("PUT", "/v1/teams/ts-rl-quota/limits", limits)).status).toBe(200);
    const key = (await t.api("POST", "/v1/keys", { team: "ts-rl-quota" })).body.key as string;
    // No retries in the client: any 429 the runner did not absorb would be thrown.
    const c = new SandtreeClient({ apiUrl: t.url, apiKey: key, retry: { maxAttempts: 1 } });
    const r = await EpisodeRunner.start(c, ENV, { name: "ts-rl-quota", concurrency: 3, creationsPer10s: 2 });
    try {
      const results = await r.run((ep) => ep.run(add(1)), 3);
      expect(results.map((x) => [x.error, x.reward])).toEqual([
        [undefined, 1],
        [undefined, 1],
        [undefined, 1],
      ]);
    } finally {
      await r.close();
    }
    expect(await active(c, "ts-rl-quota")).toEqual([]);
  });
});

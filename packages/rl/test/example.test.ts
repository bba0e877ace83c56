import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { serverForFile } from "../../server/test/helpers.js";

const EXAMPLE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../examples/fork-patches/fork-patches.mjs");
const t = serverForFile();

describe("examples/fork-patches/fork-patches.mjs", () => {
  it("tries eight patches in forks of one set-up Debian sandbox and finds the fix", async () => {
    // Async: the server under test shares this event loop.
    const { stdout } = await promisify(execFile)(process.execPath, [EXAMPLE, "--json"], {
      env: { ...process.env, SANDTREE_API_URL: t.url, SANDTREE_API_KEY: t.key, SETUP_EXTRA_SECONDS: "1" },
      timeout: 900_000,
    });
    const report = JSON.parse(stdout);
    const rewards = report.branches.map((b: { reward: number }) => b.reward);
    expect(rewards).toHaveLength(8);
    expect(report.best).toEqual({ patch: "sum(xs) / len(xs)", reward: 1 });
    expect(rewards[0]).toBeLessThan(1);
    expect(rewards.filter((r: number) => r === 1)).toHaveLength(1);
  }, 900_000);
});

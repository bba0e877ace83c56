// Eight candidate patches for a bug, each tried in a fork of one set-up sandbox: the TypeScript
// twin of fork_patches.py (see there). Run with a server up (`sandtree serve`), after `npm run build`:
//   node examples/fork-patches/fork-patches.mjs [--json]
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { EpisodeRunner } from "@sandtree/rl";
import { SandtreeClient } from "@sandtree/sdk";
import { candidates, environment as env, patched } from "./task.mjs";

/** SANDTREE_API_URL / SANDTREE_API_KEY, else the local server's credentials.env. */
function credentials() {
  const env = { ...process.env };
  const dataDir = env.SANDTREE_DATA_DIR ?? path.join(env.XDG_DATA_HOME ?? path.join(homedir(), ".local/share"), "sandtree");
  const file = path.join(dataDir, "credentials.env");
  if (!env.SANDTREE_API_KEY && existsSync(file)) {
    for (const m of readFileSync(file, "utf8").matchAll(/^(?:export )?(SANDTREE_API_(?:URL|KEY))=(.*)$/gm)) env[m[1]] ??= m[2];
  }
  return { apiUrl: env.SANDTREE_API_URL, apiKey: env.SANDTREE_API_KEY };
}

const client = new SandtreeClient(credentials());
const t0 = performance.now();
const runner = await EpisodeRunner.start(client, env, { name: "example-fork-patches-ts", concurrency: 4 });
let results;
let setupS;
let episodesS;
try {
  setupS = (performance.now() - t0) / 1000;
  const t1 = performance.now();
  results = await runner.run(async (ep) => {
    const patch = candidates[Number(ep.id.split("-").pop())];
    const file = patched(patch);
    await ep.writeFile(file.path, file.content);
    return patch;
  }, candidates.length);
  episodesS = (performance.now() - t1) / 1000;
} finally {
  await runner.close();
}
const failed = results.filter((r) => r.error !== undefined);
if (failed.length > 0) throw new Error(`${failed.length} episode(s) failed: ${failed[0].error}`);
const best = results.reduce((a, b) => ((b.reward ?? 0) > (a.reward ?? 0) ? b : a));
const round = (x) => Math.round(x * 100) / 100;
const report = {
  branches: results.map((r) => ({ patch: r.value, reward: r.reward })),
  best: { patch: best.value, reward: best.reward },
  setup_seconds: round(setupS),
  episodes_seconds: round(episodesS),
  // Setup per attempt (boot, setup, save) would be paid once more for every attempt after the first.
  saved_seconds: round(setupS * (results.length - 1)),
};
if (process.argv.includes("--json")) {
  console.log(JSON.stringify(report));
} else {
  for (const [i, b] of report.branches.entries()) console.log(`branch ${i}: reward ${b.reward.toFixed(3)}  mean = ${b.patch}`);
  console.log(`best patch: return ${best.value}  (reward ${best.reward.toFixed(3)})`);
  console.log(
    `setup once ${report.setup_seconds} s, ${results.length} forked episodes ${report.episodes_seconds} s; ` +
      `running the setup per attempt would have taken ${report.saved_seconds} s more`,
  );
}

// An RL worker the runner-kill test SIGKILLs in the middle of an episode: prints the episode's
// sandbox id, then hangs inside the policy. Argv: URL KEY NAME.
import { EpisodeRunner } from "@sandtree/rl";
import { SandtreeClient } from "@sandtree/sdk";

const [url, key, name] = process.argv.slice(2);
const client = new SandtreeClient({ apiUrl: url, apiKey: key });
const env = { image: "sandtree/busybox", setup: ["echo 0 > /root/score"], verifier: "cat /root/score" };
const runner = await EpisodeRunner.start(client, env, { name });
await runner.runEpisode(async (ep) => {
  process.stdout.write(`episode ${ep.sandboxId}\n`);
  await new Promise((r) => setTimeout(r, 3_600_000));
});

// A sandtree server in another network namespace, reached from this one: for tests
// (packages/server/test/network/host-server.ts) and benches (bench/network.mjs) that run it in a
// namespace of their own. Types and what each does: netns-api.d.mts.
import { readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { withHostCgroups } from "./host-cgroups.mjs";

const CLI = fileURLToPath(new URL("../../packages/cli/dist/main.js", import.meta.url));

export function serveArgv(dataDir, port) {
  // The server gives each VM its cgroup: the namespace's fresh /sys gets the host's hierarchies.
  return withHostCgroups(process.execPath, [CLI, "serve", "--data-dir", dataDir, "--host", "127.0.0.1", "--port", String(port)]);
}

export async function bridgeApi(spawnThere, dataDir, port) {
  const sock = path.join(dataDir, "api.sock");
  spawnThere(
    process.execPath,
    [
      "-e",
      `require("net").createServer((c) => { const u = require("net").connect(${port}, "127.0.0.1"); c.pipe(u).pipe(c); c.on("error", () => u.destroy()); u.on("error", () => c.destroy()); }).listen(process.argv[1])`,
      sock,
    ],
    { stdio: "ignore" },
  );
  const listener = net.createServer((c) => {
    const u = net.connect(sock);
    c.pipe(u).pipe(c);
    c.on("error", () => u.destroy());
    u.on("error", () => c.destroy());
  });
  await new Promise((r) => listener.listen(0, "127.0.0.1", () => r()));
  return { base: `http://127.0.0.1:${listener.address().port}`, listener };
}

export async function waitForApi(base, dataDir) {
  for (let i = 0; i < 600; i++) {
    try {
      const key = /SANDTREE_API_KEY=(\S+)/.exec(readFileSync(path.join(dataDir, "credentials.env"), "utf8"))?.[1] ?? "";
      if (key && (await fetch(`${base}/healthz`)).ok) return key;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the server of ${dataDir} did not start`);
}

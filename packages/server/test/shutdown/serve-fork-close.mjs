// Run by server-shutdown.test.ts in a network namespace of its own: a server with sandbox
// networking on, a memory fork (its RAM image built with a borrowed tap), then a memory checkpoint
// whose RAM image is still building when close() is called. Prints one JSON line after close();
// the process must then exit by itself: nothing (VM, tap, timer, socket) may be left holding it.
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";

const dataDir = process.argv[2];
const server = await startServer({ dataDir, port: 0, logger: false, warmTemplates: true, network: "on" });
const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
const out = { url: server.url };
const wait = { intervalMs: 50, timeoutMs: 300_000 };
try {
  const parent = await client.sandboxes.create({ image: "sandtree/busybox", memory_gb: 0.125, disk_size_gb: 1 });
  await client.sandboxes.waitForCreation(parent.id, wait);
  const { sandboxes } = await client.sandboxes.forkMany(parent.id, 2, { memory: true });
  const children = await Promise.all(sandboxes.map((s) => client.sandboxes.waitForCreation(s.id, wait)));
  out.children = children.map((c) => c.start_path);
  out.childSays = (await client.sandboxes.run(children[0].id, ["echo", "child"])).stdout.trim();
  // Its RAM image starts building as the checkpoint is taken: close() comes while it builds.
  const ck = await client.checkpoints.create(parent.id, { includeMemory: true });
  out.checkpoint = ck.state;
} catch (err) {
  out.error = String(err?.message ?? err);
}
await server.close();
out.closed = true;
console.log(JSON.stringify(out));

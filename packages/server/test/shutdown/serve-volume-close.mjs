// Run by server-shutdown.test.ts in a network namespace of its own: a server with sandbox
// networking on and a sandbox that mounts a volume (so the host's NFS-Ganesha runs), then close().
// Prints one JSON line after close(): what the guest wrote, the file server's pid while it served,
// and whether the volume's image is still mounted in this process's mount namespace. The process
// must then exit by itself: nothing (VM, file server, tap, timer, socket) may be left holding it.
import { readFileSync } from "node:fs";
import path from "node:path";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";

const dataDir = process.argv[2];
const server = await startServer({ dataDir, port: 0, logger: false, network: "on" });
const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey });
const out = { url: server.url };
const wait = { intervalMs: 50, timeoutMs: 300_000 };
try {
  await client.volumes.create({ name: "kept", size_gb: 1 });
  const sb = await client.sandboxes.create({
    image: "sandtree/busybox",
    memory_gb: 0.125,
    disk_size_gb: 1,
    volumes: [{ volume: "kept", path: "/mnt/kept" }],
  });
  await client.sandboxes.waitForCreation(sb.id, wait);
  const r = await client.sandboxes.run(sb.id, ["sh", "-c", "echo kept > /mnt/kept/f && sync && cat /mnt/kept/f"]);
  out.guestWrote = r.stdout.trim();
  out.fileServerPid = Number.parseInt(readFileSync(path.join(dataDir, "volume-server", "run", "ganesha.pid"), "utf8"), 10);
} catch (err) {
  out.error = String(err?.message ?? err);
}
await server.close();
out.closed = true;
out.volumesMounted = readFileSync("/proc/self/mounts", "utf8").includes(path.join(dataDir, "volumes"));
console.log(JSON.stringify(out));

// Run by server-start-failure.test.ts in a network namespace of its own: a server with sandbox
// networking on whose start fails late (its port is taken: listening is the last step, after the
// network service made its nftables table). Prints one JSON line; the process must then exit by
// itself: what the failed start set up (resolver socket, timers, table, taps) must be gone.
import net from "node:net";
import { startServer } from "@sandtree/server";

const dataDir = process.argv[2];
const taken = net.createServer();
await new Promise((resolve) => taken.listen(0, "127.0.0.1", resolve));
const { port } = taken.address();
const out = { port };
try {
  const server = await startServer({ dataDir, host: "127.0.0.1", port, logger: false, network: "on" });
  out.started = server.url;
  await server.close();
} catch (err) {
  out.error = String(err?.message ?? err);
  out.code = err?.code ?? null;
}
taken.close();
console.log(JSON.stringify(out));

// The server most benches measure through: in-process, on a fresh data directory, its first key
// in an SDK client; the bench's JSON document printed at the end, and the server and the
// directory gone however the bench ends.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { SandtreeClient } from "@sandtree/sdk";
import { startServer } from "@sandtree/server";

/**
 * Starts a server on a new directory named from `prefix` (startServer's `options` added), runs
 * `body({ server, client, work })` and prints the document it answers, then closes the server and
 * removes the directory.
 */
export async function withBenchServer(prefix, options, body) {
  const work = mkdtempSync(path.join(tmpdir(), prefix));
  const server = await startServer({ dataDir: path.join(work, "data"), port: 0, logger: false, ...options });
  try {
    const client = new SandtreeClient({ apiUrl: server.url, apiKey: server.firstKey ?? "" });
    console.log(JSON.stringify(await body({ server, client, work }), null, 2));
  } finally {
    await server.close();
    rmSync(work, { recursive: true, force: true });
  }
}

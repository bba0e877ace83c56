import { chmodSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { ServerConfigInput } from "./config.js";
import { type RunningServer, startServer } from "./server.js";

/**
 * `sandtree serve`: starts, prints the credentials on first start, stops cleanly on signals.
 * The SIGINT/SIGTERM handlers are installed before anything starts: a signal that arrives while
 * the server is still starting stops it in order once the start is done (adoptions still running
 * are cancelled by close()), instead of killing the process and orphaning the VMs it adopted.
 */
export async function runServer(input: ServerConfigInput = {}): Promise<RunningServer> {
  let server: RunningServer | null = null;
  let stopping = false;
  const shutDown = (s: RunningServer) =>
    s.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  const stop = (sig: string) => {
    if (stopping) {
      process.stdout.write(`received ${sig}, already stopping (SIGKILL forces)\n`);
      return;
    }
    stopping = true;
    process.stdout.write(`received ${sig}, stopping sandboxes...\n`);
    if (server) void shutDown(server);
    // Otherwise the start is still running: it is closed the moment it returns.
  };
  const onSigint = () => stop("SIGINT");
  const onSigterm = () => stop("SIGTERM");
  process.on("SIGINT", onSigint);
  process.on("SIGTERM", onSigterm);
  try {
    server = await startServer(input);
  } catch (err) {
    process.off("SIGINT", onSigint);
    process.off("SIGTERM", onSigterm);
    throw err;
  }
  if (stopping) {
    void shutDown(server);
    return server;
  }
  const credFile = path.join(server.dataDir, "credentials.env");
  if (server.firstKey) {
    const text = `export SANDTREE_API_URL=${server.url}\nexport SANDTREE_API_KEY=${server.firstKey}\n`;
    writeFileSync(credFile, text, { mode: 0o600 });
    chmodSync(credFile, 0o600);
    process.stdout.write(`\nsandtree is ready. Credentials of the default team (also in ${credFile}):\n\n${text}\n`);
  } else {
    process.stdout.write(`sandtree listening on ${server.url} (credentials in ${credFile})\n`);
  }
  process.stdout.write(`dashboard: ${server.url}/ (sign in with an API key)\n`);
  const fleet = server.services.fleet;
  if (fleet.joinTokenCreated) {
    process.stdout.write(
      `\nJoin token for workers (shown once; kept in ${fleet.joinTokenFile}):\n\n  ${fleet.joinToken}\n\n` +
        `  sandtree worker --join ${server.url} --join-token <token>\n`,
    );
  } else {
    process.stdout.write(`workers join with the token in ${fleet.joinTokenFile}\n`);
  }
  return server;
}

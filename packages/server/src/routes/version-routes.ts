import { clientVersionOf, compareVersions, type ServerVersion } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { VERSION } from "../version.js";

/**
 * `GET /v1/version` (no key), and a warning in the log the first time a client whose User-Agent
 * names a newer sandtree than this server calls it: it may send what this server does not know.
 */
export function versionRoutes(app: FastifyInstance): void {
  app.get("/v1/version", async (): Promise<ServerVersion> => ({ version: VERSION }));
  const warned = new Set<string>();
  app.addHook("onRequest", async (req) => {
    const ua = req.headers["user-agent"];
    const client = clientVersionOf(ua);
    if (client === null || warned.has(client) || compareVersions(client, VERSION) <= 0) return;
    warned.add(client);
    req.log.warn(
      { userAgent: ua, clientVersion: client, serverVersion: VERSION },
      `a client of sandtree ${client} is newer than this server (${VERSION}); upgrade the server, or use a client of ${VERSION}`,
    );
  });
}

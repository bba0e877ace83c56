import { SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";

/**
 * A GET or HEAD to the API that carries a body: no route reads it, and Node closes the
 * connection once the answer is out while the client may still be sending, so the reset can cut
 * a large answer short (the OpenAPI document under a 2 MiB body: the API fuzz test's "aborted").
 * The body is read and dropped before the route answers; one over the server's body limit is
 * refused (413) unread. Proxied ports (/ports/...) keep their bodies: they are the guest's.
 */
export function dropUnreadBodies(app: FastifyInstance, limit: number): void {
  app.addHook("onRequest", async (req) => {
    if ((req.method !== "GET" && req.method !== "HEAD") || !req.url.startsWith("/v1/")) return;
    const raw = req.raw;
    const length = Number(raw.headers["content-length"] ?? 0);
    if (!(length > 0) && raw.headers["transfer-encoding"] === undefined) return;
    const tooLarge = () =>
      new SandtreeError("PAYLOAD_TOO_LARGE", `a ${req.method} request carries no body; this one is over ${limit} bytes`, {
        limit_bytes: limit,
      });
    if (length > limit) throw tooLarge();
    await new Promise<void>((resolve, reject) => {
      let seen = 0;
      const onData = (chunk: Buffer) => {
        seen += chunk.length;
        if (seen <= limit) return;
        raw.off("data", onData);
        reject(tooLarge());
      };
      raw.on("data", onData);
      raw.once("end", () => resolve());
      raw.once("error", reject);
      raw.once("close", () => resolve());
    });
  });
}

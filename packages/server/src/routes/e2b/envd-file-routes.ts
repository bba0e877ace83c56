import path from "node:path";
import type { Readable } from "node:stream";
import { SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { parse } from "../../errors.js";
import type { Services } from "../../services/services.js";
import { sendDownload } from "../file-replies.js";
import { notSupported } from "./e2b-errors.js";
import { envdCaller, rootOnly } from "./envd-context.js";
import { boundaryOf, multipartParts } from "./multipart.js";

const FilesQuery = z.strictObject({
  path: z.string().min(1).max(4096).optional(),
  username: z.string().max(256).optional(),
  signature: z.string().optional(),
  signature_expiration: z.string().optional(),
});

function query(req: FastifyRequest) {
  const q = parse(FilesQuery, req.query);
  if (q.signature !== undefined || q.signature_expiration !== undefined) throw notSupported("signed file URLs");
  rootOnly(q.username);
  return q;
}

/** envd's plain HTTP routes: file downloads and uploads (streamed, any size) and the health check. */
export function envdFileRoutes(app: FastifyInstance, s: Services): void {
  // A sandbox that runs answers 204; one that does not, 502 (what the SDKs read as "not running").
  app.get("/health", async (req, reply) => {
    const c = await envdCaller(req, s);
    try {
      await s.sandboxes.running(c.teamId, c.sandboxId);
    } catch {
      return reply.status(502).send({ code: 502, message: `sandbox ${c.sandboxId} is not running` });
    }
    return reply.status(204).send();
  });

  app.get("/files", async (req, reply) => {
    const c = await envdCaller(req, s);
    const q = query(req);
    if (!q.path) throw new SandtreeError("VALIDATION_FAILED", "path is required", { field: "path" });
    const abort = new AbortController();
    const dl = await s.files.download(c.teamId, c.sandboxId, q.path, { signal: abort.signal });
    return sendDownload(reply, dl, abort);
  });

  // octet-stream: the body is the file at ?path. multipart: each `file` part is written at ?path,
  // or at its filename when there is no ?path (several files in one request).
  app.post("/files", async (req) => {
    const c = await envdCaller(req, s);
    const q = query(req);
    const written: Array<{ name: string; type: "file"; path: string }> = [];
    const put = async (p: string, body: AsyncIterable<Uint8Array>) => {
      const r = await s.files.upload(c.teamId, c.sandboxId, p, body);
      written.push({ name: path.posix.basename(r.path), type: "file", path: r.path });
    };
    const boundary = boundaryOf(req.headers["content-type"]);
    if (boundary) {
      for await (const part of multipartParts(req.body as Readable, boundary)) {
        const target = q.path ?? part.filename;
        if (!target) throw new SandtreeError("VALIDATION_FAILED", "a part without a filename needs ?path", { field: "path" });
        await put(target, part.body);
      }
    } else {
      if (req.headers["content-encoding"]) throw notSupported(`uploads with content-encoding ${req.headers["content-encoding"]}`);
      if (!q.path) throw new SandtreeError("VALIDATION_FAILED", "path is required", { field: "path" });
      await put(q.path, req.body as Readable);
    }
    if (written.length === 0) throw new SandtreeError("VALIDATION_FAILED", "no file in the request", { field: "file" });
    return written;
  });
}

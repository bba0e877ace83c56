import path from "node:path";
import type { Readable } from "node:stream";
import { PrimeExecRequest, PrimeFileQuery, PrimeReadFileQuery, SandtreeError } from "@sandtree/protocol";
import busboy from "busboy";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { parse } from "../../errors.js";
import type { Services } from "../../services/services.js";
import { sendDownload } from "../file-replies.js";
import { gatewayCaller } from "./prime-gateway-auth.js";

/** The most `read-file` answers in one JSON body; past it, 413 (the client then reads a window or downloads). */
export const READ_FILE_LIMIT = 16 * 1024 * 1024;
export const GATEWAY_PREFIX = "/gateway/:ns/:sid";

/** Counts the call as the sandbox's activity (idle timeouts) while it runs. */
async function activity(s: Services, reply: FastifyReply, teamId: string, id: string): Promise<void> {
  const end = await s.timeouts.begin(teamId, id);
  reply.raw.once("close", end);
}

async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of chunks) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

/** The one file part of a multipart/form-data body, streamed (never held whole). */
function filePart(req: FastifyRequest): Promise<Readable> {
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({ headers: req.headers, limits: { files: 1, fields: 16 } });
    } catch (err) {
      reject(
        new SandtreeError("UNSUPPORTED_MEDIA_TYPE", `upload: a multipart/form-data body is expected (${(err as Error).message})`),
      );
      return;
    }
    let found = false;
    bb.on("file", (_name, stream) => {
      found = true;
      resolve(stream);
    });
    bb.on("error", (err) => reject(new SandtreeError("BAD_REQUEST", `upload: ${(err as Error).message}`)));
    bb.on("close", () => {
      if (!found) reject(new SandtreeError("VALIDATION_FAILED", "upload: the form has no file part", { field: "file" }));
    });
    (req.body as Readable).pipe(bb);
  });
}

/**
 * The Prime gateway's file routes (`{gateway_url}/{user_ns}/{job_id}/...`), on sandtree's file
 * service, authorized by the gateway token. Commands go through the Connect command session
 * (prime-command-session.ts).
 */
export function primeGatewayRoutes(app: FastifyInstance, s: Services): void {
  // Clients before 0.5 run commands here (`sh -c`); 0.5 uses the command session.
  app.post(`${GATEWAY_PREFIX}/exec`, { bodyLimit: 32 * 1024 * 1024 }, async (req, reply) => {
    const { principal, sandbox } = await gatewayCaller(s, req.params, req.headers.authorization);
    const body = parse(PrimeExecRequest, req.body);
    await activity(s, reply, principal.teamId, sandbox.id);
    const r = await s.exec.runBuffered(principal.teamId, sandbox.id, {
      command: body.command,
      env: body.env,
      stdin_open: false,
      ...(body.working_dir ? { cwd: body.working_dir } : {}),
      ...(body.user ? { user: body.user } : {}),
      ...(body.timeout ? { timeout_seconds: body.timeout } : {}),
    });
    if (r.timed_out) {
      return reply
        .status(408)
        .send({ detail: `the command timed out after ${body.timeout}s`, code: "TIMEOUT", stdout: r.stdout, stderr: r.stderr });
    }
    return { stdout: r.stdout, stderr: r.stderr, exit_code: r.exit_code };
  });

  app.post(`${GATEWAY_PREFIX}/upload`, { bodyLimit: Number.MAX_SAFE_INTEGER }, async (req, reply) => {
    const { principal, sandbox } = await gatewayCaller(s, req.params, req.headers.authorization);
    const q = parse(PrimeFileQuery, req.query);
    await activity(s, reply, principal.teamId, sandbox.id);
    const file = await filePart(req);
    // Prime's gateway makes the missing directories of the path.
    const dir = path.posix.dirname(path.posix.join("/", q.path));
    if (dir !== "/") {
      await s.files.mkdir(principal.teamId, sandbox.id, dir, true, 0o755).catch((err) => {
        if (!(err instanceof SandtreeError && err.code === "ALREADY_EXISTS")) throw err;
      });
    }
    const r = await s.files.upload(principal.teamId, sandbox.id, q.path, file);
    return { success: true, path: r.path, size: r.bytes, timestamp: new Date().toISOString() };
  });

  app.get(`${GATEWAY_PREFIX}/download`, async (req, reply) => {
    const { principal, sandbox } = await gatewayCaller(s, req.params, req.headers.authorization);
    const q = parse(PrimeFileQuery, req.query);
    await activity(s, reply, principal.teamId, sandbox.id);
    const abort = new AbortController();
    const dl = await s.files.download(principal.teamId, sandbox.id, q.path, { signal: abort.signal });
    return sendDownload(reply, dl, abort);
  });

  // offset: where to start (negative: that many bytes before the end); length: at most this many.
  app.get(`${GATEWAY_PREFIX}/read-file`, async (req, reply) => {
    const { principal, sandbox } = await gatewayCaller(s, req.params, req.headers.authorization);
    const q = parse(PrimeReadFileQuery, req.query);
    await activity(s, reply, principal.teamId, sandbox.id);
    const st = await s.files.stat(principal.teamId, sandbox.id, q.path);
    if (st.type === "dir") throw new SandtreeError("IS_A_DIRECTORY", `${q.path} is a directory`, { path: q.path });
    const total = st.size;
    const offset = q.offset === undefined ? 0 : q.offset < 0 ? Math.max(0, total + q.offset) : Math.min(q.offset, total);
    const want = Math.min(q.length ?? total - offset, total - offset);
    if (want > READ_FILE_LIMIT) {
      throw new SandtreeError(
        "PAYLOAD_TOO_LARGE",
        `${q.path}: ${want} bytes is more than read-file answers (${READ_FILE_LIMIT}); read a window (offset, length) or download it`,
        { path: q.path, size: total },
      );
    }
    const dl = await s.files.download(principal.teamId, sandbox.id, q.path, { offset, length: want });
    const bytes = await collect(dl.chunks);
    return {
      content: bytes.toString("utf8"),
      size: bytes.length,
      total_size: total,
      offset,
      truncated: offset > 0 || offset + bytes.length < total,
    };
  });
}

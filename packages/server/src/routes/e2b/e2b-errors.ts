import { SandtreeError } from "@sandtree/protocol";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { renderError } from "../../errors.js";

/** E2B's error shape: `{code, message}` with `code` the HTTP status; sandtree's code leads the message. */
export function e2bErrorHandler(err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply): void {
  const r = renderError(err, String(req.id), req.log);
  const retry = r.body.details?.retry_after_seconds;
  if (typeof retry === "number") reply.header("retry-after", String(retry));
  void reply.status(r.status).send({ code: r.status, message: `${r.body.code}: ${r.body.message}` });
}

/** A feature E2B has and sandtree has not: refused, naming what is missing. */
export function notSupported(what: string): SandtreeError {
  return new SandtreeError("NOT_SUPPORTED", `${what} is not supported by sandtree's E2B API (see docs/e2b.md)`);
}

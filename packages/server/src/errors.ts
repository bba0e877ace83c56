import { type ErrorCode, SandtreeError } from "@sandtree/protocol";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";

/** Parses with zod; failures become 400 VALIDATION_FAILED naming the first offending field. */
export function parse<S extends z.ZodType>(schema: S, data: unknown): z.output<S> {
  const r = schema.safeParse(data);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const field = issue?.path.join(".") || undefined;
  throw new SandtreeError("VALIDATION_FAILED", field ? `${field}: ${issue?.message}` : (issue?.message ?? "invalid request"), {
    ...(field ? { field } : {}),
    issues: r.error.issues.map((i) => ({ path: i.path.join("."), message: i.message })),
  });
}

const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: "PAYLOAD_TOO_LARGE",
  FST_ERR_CTP_INVALID_MEDIA_TYPE: "UNSUPPORTED_MEDIA_TYPE",
  FST_ERR_CTP_EMPTY_JSON_BODY: "BAD_REQUEST",
  FST_ERR_CTP_INVALID_JSON_BODY: "BAD_REQUEST",
};

/** The one place errors are rendered: `{code, message, details?, request_id}`. */
export function errorHandler(err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply): void {
  let code: ErrorCode;
  let message = err.message;
  let details: Record<string, unknown> | undefined;
  let status: number;
  if (err instanceof SandtreeError) {
    code = err.code;
    details = err.details;
    status = err.status;
  } else {
    const fe = err as FastifyError;
    const mapped = fe.code ? FASTIFY_CODES[fe.code] : undefined;
    if (mapped) {
      code = mapped;
      status = fe.statusCode ?? 400;
    } else if ((fe.code as string | undefined) === "SQLITE_FULL" || fe.code === "ENOSPC") {
      // The host's data disk is full: a clear, stable answer instead of a bare 500.
      req.log.warn({ err }, "data disk full");
      code = "HOST_DISK_FULL";
      status = 507;
      message = "the server's data disk is full; free space on the host and retry";
    } else if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
      code = fe instanceof SyntaxError || fe.statusCode === 400 ? "BAD_REQUEST" : "BAD_REQUEST";
      status = fe.statusCode;
    } else {
      req.log.error({ err }, "unhandled error");
      code = "INTERNAL";
      status = 500;
      message = "internal error";
    }
  }
  if (reply.sent || reply.raw.headersSent) {
    reply.raw.destroy();
    return;
  }
  const retryAfter = details?.retry_after_seconds;
  if (typeof retryAfter === "number") reply.header("retry-after", String(retryAfter));
  reply.status(status).send({ code, message, ...(details ? { details } : {}), request_id: String(req.id) });
}

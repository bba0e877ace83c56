import { type IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { type ErrorBody, type ErrorCode, SandtreeError } from "@sandtree/protocol";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import { toApiError } from "./services/observability/error-codes.js";

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

/** Every request's id, in logs and error answers (also for upgrades refused before routing). */
export function newRequestId(): string {
  return `req_${Math.random().toString(36).slice(2, 12)}`;
}

const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: "PAYLOAD_TOO_LARGE",
  FST_ERR_CTP_INVALID_MEDIA_TYPE: "UNSUPPORTED_MEDIA_TYPE",
  FST_ERR_CTP_EMPTY_JSON_BODY: "BAD_REQUEST",
  FST_ERR_CTP_INVALID_JSON_BODY: "BAD_REQUEST",
};

interface ErrorLog {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface RenderedError {
  status: number;
  body: ErrorBody & { request_id: string };
}

/** Any thrown value as a SandtreeError, or null for an unknown one (logged by the caller). */
function classify(err: unknown): { error: SandtreeError; status: number } | null {
  const known = toApiError(err);
  if (known) return { error: known, status: known.status };
  const fe = err as Partial<FastifyError>;
  const message = fe.message ?? String(err);
  const mapped = fe.code ? FASTIFY_CODES[fe.code] : undefined;
  if (mapped) return { error: new SandtreeError(mapped, message), status: fe.statusCode ?? 400 };
  // Fastify's own 4xx (a malformed URL, a bad header): the status it chose, a stable code.
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    return { error: new SandtreeError("BAD_REQUEST", message), status: fe.statusCode };
  }
  return null;
}

/**
 * The one renderer of error answers: `{code, message, details?, request_id}` with the status the
 * registry gives the code. Known 5xx causes are logged as warnings; an unknown error is logged
 * with its stack and answered as a plain 500 INTERNAL that says nothing of it.
 */
export function renderError(err: unknown, requestId: string, log?: ErrorLog): RenderedError {
  const known = classify(err);
  if (!known) {
    log?.error({ err }, "unhandled error");
    return { status: 500, body: { code: "INTERNAL", message: "internal error", request_id: requestId } };
  }
  const { error, status } = known;
  if (status >= 500) log?.warn({ err, code: error.code }, "request failed");
  const body = {
    code: error.code,
    message: error.message,
    ...(error.details ? { details: error.details } : {}),
    request_id: requestId,
  };
  return { status, body };
}

function sendRendered(reply: FastifyReply, r: RenderedError): void {
  const retryAfter = r.body.details?.retry_after_seconds;
  if (typeof retryAfter === "number") reply.header("retry-after", String(retryAfter));
  reply.header("x-request-id", r.body.request_id);
  reply.status(r.status).send(r.body);
}

/** Fastify's error handler: every error a route, hook or parser throws. */
export function errorHandler(err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply): void {
  if (reply.sent || reply.raw.headersSent) {
    reply.raw.destroy();
    return;
  }
  sendRendered(reply, renderError(err, String(req.id), req.log));
}

/** Fastify's not-found handler: 404 ROUTE_NOT_FOUND naming the method and path. */
export function notFoundHandler(req: FastifyRequest, reply: FastifyReply): void {
  const err = new SandtreeError("ROUTE_NOT_FOUND", `no route ${req.method} ${req.url.split("?")[0]}`);
  sendRendered(reply, renderError(err, String(req.id), req.log));
}

/**
 * The one writer of an error on a raw socket (an Upgrade refused before fastify routed it): the
 * rendered error as an HTTP answer written by Node, then the connection closes.
 */
export function writeSocketError(socket: Duplex, req: IncomingMessage, err: SandtreeError, requestId: string): void {
  const r = renderError(err, requestId);
  const text = JSON.stringify(r.body);
  const res = new ServerResponse(req);
  res.assignSocket(socket as Socket);
  res.on("finish", () => socket.end());
  res.writeHead(r.status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "x-request-id": requestId,
    connection: "close",
  });
  res.end(text);
}

import { ErrorBody } from "@sandtree/protocol";
import {
  apiErrorFrom,
  ConnectionError,
  InvalidResponseError,
  parseRetryAfter,
  SandtreeSdkError,
  TimeoutError,
} from "./errors.js";
import { DEFAULT_RETRY, type ResolvedRetry, retryable, retryDelay, sleep } from "./retry.js";

/** Options every SDK call accepts. */
export interface RequestOptions {
  signal?: AbortSignal;
  /** Overrides the client's timeoutMs for this call; 0 disables the timeout. */
  timeoutMs?: number;
}

/** Anything with zod's `parse`; keeps the SDK free of a direct zod import. */
export interface Schema<T> {
  parse(data: unknown): T;
}

export type QueryValue = string | number | boolean | readonly string[] | undefined;

export interface HttpRequest extends RequestOptions {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Record<string, QueryValue>;
  json?: unknown;
  /** A raw body; a ReadableStream is sent chunked (`duplex: "half"`). */
  body?: ReadableStream<Uint8Array> | Uint8Array | string;
  accept?: string;
  /**
   * "full": the deadline covers reading the body (JSON answers).
   * "headers": it stops once the answer's headers arrive (streams, long transfers).
   */
  timeoutScope?: "full" | "headers";
  /** Resending cannot do the work twice (default: true for GET, PUT and DELETE); see retry.ts. */
  idempotent?: boolean;
}

export interface HttpConfig {
  apiUrl: string;
  apiKey: string;
  timeoutMs: number;
  fetch: typeof globalThis.fetch;
  retry?: ResolvedRetry;
  /** Sent on every request, WebSocket upgrades included. */
  userAgent: string;
}

/** A started request: the response plus the bookkeeping to turn failures into typed errors. */
export interface OpenResponse {
  response: Response;
  /** Maps an error thrown while reading the body to the SDK's typed errors. */
  mapError(err: unknown): unknown;
  /** Stops the deadline (call once the body is fully read). */
  done(): void;
}

export class HttpClient {
  readonly apiUrl: string;
  readonly userAgent: string;
  private readonly config: HttpConfig;

  constructor(config: HttpConfig) {
    this.config = config;
    this.apiUrl = config.apiUrl.replace(/\/+$/, "");
    this.userAgent = config.userAgent;
  }

  /** The credentials and User-Agent every request carries (pty() sends them on its WebSocket upgrade). */
  authHeaders(): Record<string, string> {
    return { authorization: `Bearer ${this.config.apiKey}`, "user-agent": this.userAgent };
  }

  url(path: string, query?: Record<string, QueryValue>): string {
    const url = new URL(this.apiUrl + path);
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value === undefined) continue;
      if (Array.isArray(value)) for (const v of value) url.searchParams.append(key, v);
      else url.searchParams.append(key, String(value));
    }
    return url.toString();
  }

  /**
   * Sends a request and throws the typed error for any non-2xx answer. 429, 5xx and connection
   * failures are retried with backoff when that is safe (see retry.ts); streamed bodies never are.
   */
  async open(req: HttpRequest): Promise<OpenResponse> {
    const policy = this.config.retry ?? DEFAULT_RETRY;
    const replayable = !(req.body instanceof ReadableStream);
    const idempotent = req.idempotent ?? req.method !== "POST";
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.openOnce(req);
      } catch (err) {
        if (attempt >= policy.maxAttempts || !replayable || !retryable(err, idempotent)) throw err;
        const wait = retryDelay(err, attempt, policy);
        if (wait === undefined) throw err;
        await sleep(wait, req.signal);
      }
    }
  }

  private async openOnce(req: HttpRequest): Promise<OpenResponse> {
    const timeoutMs = req.timeoutMs ?? this.config.timeoutMs;
    const deadline = new AbortController();
    const timer =
      timeoutMs > 0
        ? setTimeout(
            () =>
              deadline.abort(
                new TimeoutError(
                  `${req.method} ${req.path} got no answer within ${timeoutMs} ms; raise timeoutMs or check the server`,
                  timeoutMs,
                ),
              ),
            timeoutMs,
          )
        : undefined;
    const done = () => clearTimeout(timer);
    const signal = req.signal ? AbortSignal.any([req.signal, deadline.signal]) : deadline.signal;
    const mapError = (err: unknown): unknown => {
      if (req.signal?.aborted) return req.signal.reason;
      if (deadline.signal.aborted) return deadline.signal.reason;
      if (err instanceof SandtreeSdkError) return err;
      return new ConnectionError(
        `could not reach the sandtree server at ${this.apiUrl} (${describe(err)}); is it running? start it with \`sandtree serve\` or set SANDTREE_API_URL`,
        { cause: err },
      );
    };

    const headers = this.authHeaders();
    if (req.accept) headers.accept = req.accept;
    let body: RequestInit["body"];
    if (req.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(req.json);
    } else if (req.body !== undefined) {
      headers["content-type"] = "application/octet-stream";
      body = req.body as RequestInit["body"];
    }
    const init = { method: req.method, headers, body, signal, duplex: "half" } as RequestInit;

    let response: Response;
    try {
      response = await this.config.fetch(this.url(req.path, req.query), init);
    } catch (err) {
      done();
      throw mapError(err);
    }
    if ((req.timeoutScope ?? "full") === "headers") done();
    if (!response.ok) {
      try {
        throw await errorFromResponse(response);
      } catch (err) {
        done();
        throw mapError(err);
      }
    }
    return { response, mapError, done };
  }

  /** A JSON request whose answer is validated with `schema`. */
  async json<T>(schema: Schema<T>, req: HttpRequest): Promise<T> {
    const { response, mapError, done } = await this.open({ accept: "application/json", ...req });
    let data: unknown;
    try {
      data = await response.json();
    } catch (err) {
      const mapped = mapError(err);
      throw mapped instanceof ConnectionError
        ? new InvalidResponseError(`${req.method} ${req.path} answered with a body that is not JSON`, { cause: err })
        : mapped;
    } finally {
      done();
    }
    return parseOrThrow(schema, data, `${req.method} ${req.path}`);
  }

  /**
   * A POST of `json` whose work may take long (a pull, a desktop action that waits): no client
   * deadline unless `options` sets one, since the work ends on its own terms on the server.
   */
  postLong<T>(schema: Schema<T>, path: string, json: unknown, options: RequestOptions = {}): Promise<T> {
    return this.json(schema, { timeoutMs: 0, ...options, method: "POST", path, json });
  }

  /** A request whose answer's body is read whole as bytes; the response comes too (its headers). */
  async bytes(req: HttpRequest): Promise<{ response: Response; body: Uint8Array }> {
    const { response, mapError, done } = await this.open(req);
    try {
      return { response, body: new Uint8Array(await response.arrayBuffer()) };
    } catch (err) {
      throw mapError(err);
    } finally {
      done();
    }
  }

  /** A request whose answer has no body we care about (204). */
  async empty(req: HttpRequest): Promise<void> {
    await this.bytes(req);
  }
}

export function parseOrThrow<T>(schema: Schema<T>, data: unknown, what: string): T {
  try {
    return schema.parse(data);
  } catch (err) {
    throw new InvalidResponseError(
      `${what} answered with an unexpected shape (is the server the same version as the SDK?): ${describe(err)}`,
      { cause: err },
    );
  }
}

async function errorFromResponse(response: Response): Promise<Error> {
  const text = await response.text();
  const requestId = response.headers.get("x-request-id") ?? undefined;
  const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"));
  let body: ErrorBody;
  try {
    body = ErrorBody.parse(JSON.parse(text));
  } catch {
    // Not a sandtree error body (a proxy, or a crash before the error handler).
    const snippet = text.trim().slice(0, 200);
    body = { code: `HTTP_${response.status}`, message: snippet || response.statusText || `HTTP ${response.status}` };
  }
  return apiErrorFrom(response.status, body, { retryAfterMs, requestId });
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : "";
    return `${err.message}${cause}`;
  }
  return String(err);
}

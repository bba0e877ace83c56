import { SandtreeError } from "@sandtree/protocol";

export interface RegistryCredentials {
  username: string;
  password: string;
}

export interface AuthChallenge {
  scheme: string;
  params: Record<string, string>;
}

/**
 * Parses a `WWW-Authenticate` header (RFC 7235): `Bearer realm="...",service="...",scope="..."`.
 * Several challenges may share one header; each starts with a scheme token.
 */
export function parseWwwAuthenticate(header: string): AuthChallenge[] {
  const challenges: AuthChallenge[] = [];
  // Each match is either a bare token (a new challenge's scheme) or one key=value parameter.
  const re = /\s*([^\s=,]+)(?:\s*=\s*("(?:[^"\\]|\\.)*"|[^,]*))?\s*,?/y;
  let current: AuthChallenge | undefined;
  while (re.lastIndex < header.length) {
    const start = re.lastIndex;
    const m = re.exec(header);
    if (!m || re.lastIndex === start) break;
    const name = m[1] ?? "";
    const raw = m[2];
    if (raw === undefined) {
      current = { scheme: name.toLowerCase(), params: {} };
      challenges.push(current);
      continue;
    }
    const value = raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, "$1") : raw.trim();
    if (current) current.params[name.toLowerCase()] = value;
  }
  return challenges;
}

export function basicAuthorization(credentials: RegistryCredentials): string {
  const raw = `${credentials.username}:${credentials.password}`;
  return `Basic ${Buffer.from(raw, "utf8").toString("base64")}`;
}

export interface TokenRequest {
  challenge: AuthChallenge;
  /** Used when the challenge names no scope. */
  defaultScope: string;
  credentials?: RegistryCredentials | undefined;
  fetch: typeof fetch;
  signal?: AbortSignal | undefined;
  registry: string;
}

/**
 * Fetches a bearer token from the challenge's realm (the docker token protocol): anonymous,
 * or with HTTP basic credentials when we have them.
 */
export async function fetchBearerToken(req: TokenRequest): Promise<string> {
  const { challenge, registry } = req;
  const realm = challenge.params.realm;
  if (!realm) {
    throw new SandtreeError("IMAGE_PULL_FAILED", `registry ${registry} sent a Bearer challenge without a realm`);
  }
  let url: URL;
  try {
    url = new URL(realm);
  } catch {
    throw new SandtreeError("IMAGE_PULL_FAILED", `registry ${registry} sent a bad token realm`, { realm });
  }
  if (challenge.params.service) url.searchParams.set("service", challenge.params.service);
  url.searchParams.set("scope", challenge.params.scope ?? req.defaultScope);
  const headers: Record<string, string> = { accept: "application/json" };
  if (req.credentials) headers.authorization = basicAuthorization(req.credentials);
  let res: Response;
  try {
    res = await req.fetch(url, req.signal ? { headers, signal: req.signal } : { headers });
  } catch (e) {
    if (req.signal?.aborted) throw e;
    throw new SandtreeError("REGISTRY_UNREACHABLE", `token service ${url.host} unreachable: ${errMessage(e)}`, {
      registry,
      cause: errMessage(e),
    });
  }
  if (res.status === 401 || res.status === 403) {
    await res.body?.cancel();
    throw new SandtreeError("REGISTRY_UNAUTHORIZED", `registry ${registry} refused the credentials`, {
      registry,
      status: res.status,
    });
  }
  if (!res.ok) {
    const text = (await res.text()).slice(0, 500);
    throw new SandtreeError("IMAGE_PULL_FAILED", `token service answered ${res.status}`, {
      registry,
      status: res.status,
      body: text,
    });
  }
  const body = (await res.json().catch(() => ({}))) as { token?: unknown; access_token?: unknown };
  const token = typeof body.token === "string" ? body.token : body.access_token;
  if (typeof token !== "string" || token.length === 0) {
    throw new SandtreeError("IMAGE_PULL_FAILED", `token service for ${registry} returned no token`);
  }
  return token;
}

export function errMessage(e: unknown): string {
  if (e instanceof Error) {
    const cause = (e as { cause?: unknown }).cause;
    if (cause instanceof Error) return `${e.message} (${(cause as NodeJS.ErrnoException).code ?? cause.message})`;
    return e.message;
  }
  return String(e);
}

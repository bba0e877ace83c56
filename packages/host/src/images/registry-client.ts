import { SandtreeError } from "@sandtree/protocol";
import { sha256Bytes, writeVerified } from "./digest.js";
import type { ImageSource, ManifestDocument, ResolvedManifest, ResolveManifestOptions } from "./image-source.js";
import { resolveThroughIndex } from "./image-source.js";
import { type Descriptor, MANIFEST_ACCEPT } from "./oci-types.js";
import { registryBaseUrl } from "./reference.js";
import {
  basicAuthorization,
  errMessage,
  fetchBearerToken,
  parseWwwAuthenticate,
  type RegistryCredentials,
} from "./registry-auth.js";

export interface RegistryClientOptions {
  /** `host[:port]` as written in the reference (`docker.io` is mapped to its API host). */
  registry: string;
  /** The repository path on that registry (`library/alpine` on Docker Hub). */
  repository: string;
  credentials?: RegistryCredentials | undefined;
  /** Use plain http even for non-loopback hosts. */
  insecure?: boolean | undefined;
  /** Deadline for a response's headers; a download itself is bounded only by the caller's signal. */
  requestTimeoutMs?: number | undefined;
  fetch?: typeof fetch | undefined;
}

const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;

/**
 * An OCI distribution client for one repository: anonymous first, then the registry's
 * Bearer (token service) or Basic challenge, as docker and containerd do.
 */
export class RegistryClient implements ImageSource {
  readonly description: string;
  private readonly base: string;
  private readonly fetchImpl: typeof fetch;
  private readonly timeoutMs: number;
  private authorization: string | undefined;

  constructor(private readonly opts: RegistryClientOptions) {
    this.base = registryBaseUrl(opts.registry, opts.insecure ?? false);
    this.fetchImpl = opts.fetch ?? fetch;
    this.timeoutMs = opts.requestTimeoutMs ?? 30_000;
    this.description = `${opts.registry}/${opts.repository}`;
  }

  async resolveManifest(reference: string | undefined, opts: ResolveManifestOptions = {}): Promise<ResolvedManifest> {
    const fetchDoc = (ref: string) => this.fetchManifest(ref, opts.signal);
    const first = await fetchDoc(reference ?? "latest");
    return resolveThroughIndex(fetchDoc, first, opts.platform);
  }

  async fetchManifest(reference: string, signal?: AbortSignal): Promise<ManifestDocument> {
    const res = await this.request(`manifests/${reference}`, MANIFEST_ACCEPT, signal);
    const declared = Number(res.headers.get("content-length") ?? "0");
    if (declared > MAX_MANIFEST_BYTES) {
      await res.body?.cancel();
      throw new SandtreeError("IMAGE_INVALID", `manifest of ${this.description} is too large`);
    }
    let bytes: Uint8Array;
    try {
      bytes = new Uint8Array(await res.arrayBuffer());
    } catch (e) {
      throw this.networkError(e, signal);
    }
    const digest = sha256Bytes(bytes);
    const header = res.headers.get("docker-content-digest");
    const mismatch =
      (reference.startsWith("sha256:") && digest !== reference) || (header?.startsWith("sha256:") === true && header !== digest);
    if (mismatch) {
      throw new SandtreeError("IMAGE_INVALID", `manifest digest mismatch for ${this.description}@${reference}`, {
        expected: reference.startsWith("sha256:") ? reference : header,
        actual: digest,
      });
    }
    return { bytes, digest, contentType: res.headers.get("content-type") ?? undefined };
  }

  async fetchBlob(descriptor: Descriptor, destPath: string, opts: { signal?: AbortSignal } = {}): Promise<void> {
    const res = await this.request(`blobs/${descriptor.digest}`, "*/*", opts.signal);
    if (!res.body) throw new SandtreeError("IMAGE_PULL_FAILED", `empty body for blob ${descriptor.digest}`);
    try {
      await writeVerified(res.body, destPath, descriptor, { signal: opts.signal });
    } catch (e) {
      if (e instanceof SandtreeError) throw e;
      throw this.networkError(e, opts.signal);
    }
  }

  /** One GET with auth negotiation; maps statuses to error codes. */
  private async request(path: string, accept: string, signal?: AbortSignal): Promise<Response> {
    const url = `${this.base}/v2/${this.opts.repository}/${path}`;
    let negotiated = false;
    for (;;) {
      const res = await this.send(url, accept, signal);
      if (res.status === 401 && !negotiated) {
        negotiated = true;
        const challenge = res.headers.get("www-authenticate") ?? "";
        await res.body?.cancel();
        await this.authenticate(challenge, signal);
        continue;
      }
      if (res.ok) return res;
      const body = (await res.text().catch(() => "")).slice(0, 500);
      const details = { registry: this.opts.registry, repository: this.opts.repository, url, status: res.status, body };
      if (res.status === 401 || res.status === 403) {
        throw new SandtreeError(
          "REGISTRY_UNAUTHORIZED",
          `registry ${this.opts.registry} denied access to ${this.opts.repository}`,
          details,
        );
      }
      if (res.status === 404) {
        const [kind, ref] = path.split("/");
        const what = kind === "blobs" ? `blob ${ref}` : `${this.description}${ref?.startsWith("sha256:") ? "@" : ":"}${ref}`;
        throw new SandtreeError("IMAGE_NOT_FOUND", `${what} not found on ${this.opts.registry}`, details);
      }
      throw new SandtreeError("IMAGE_PULL_FAILED", `registry ${this.opts.registry} answered ${res.status} for ${path}`, details);
    }
  }

  private async authenticate(header: string, signal?: AbortSignal): Promise<void> {
    const challenges = parseWwwAuthenticate(header);
    const bearer = challenges.find((c) => c.scheme === "bearer");
    const basic = challenges.find((c) => c.scheme === "basic");
    if (bearer) {
      const deadline = this.withTimeout(signal);
      const token = await fetchBearerToken({
        challenge: bearer,
        defaultScope: `repository:${this.opts.repository}:pull`,
        credentials: this.opts.credentials,
        fetch: this.fetchImpl,
        signal: deadline.signal,
        registry: this.opts.registry,
      }).finally(deadline.clear);
      this.authorization = `Bearer ${token}`;
      return;
    }
    if (basic && this.opts.credentials) {
      this.authorization = basicAuthorization(this.opts.credentials);
      return;
    }
    throw new SandtreeError(
      "REGISTRY_UNAUTHORIZED",
      `registry ${this.opts.registry} requires ${basic ? "credentials" : `an unsupported auth scheme (${header || "none"})`}`,
      { registry: this.opts.registry, challenge: header },
    );
  }

  private async send(url: string, accept: string, signal?: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { accept, "user-agent": "sandtree" };
    if (this.authorization) headers.authorization = this.authorization;
    const deadline = this.withTimeout(signal);
    try {
      return await this.fetchImpl(url, { headers, signal: deadline.signal, redirect: "follow" });
    } catch (e) {
      throw this.networkError(e, signal);
    } finally {
      // Headers arrived (or failed): the deadline no longer applies to the body.
      deadline.clear();
    }
  }

  private withTimeout(signal?: AbortSignal): { signal: AbortSignal; clear: () => void } {
    const ctl = new AbortController();
    const timer = setTimeout(
      () =>
        ctl.abort(
          new SandtreeError("REGISTRY_UNREACHABLE", `registry ${this.opts.registry} timed out after ${this.timeoutMs} ms`, {
            registry: this.opts.registry,
          }),
        ),
      this.timeoutMs,
    );
    timer.unref();
    return {
      signal: signal ? AbortSignal.any([signal, ctl.signal]) : ctl.signal,
      clear: () => clearTimeout(timer),
    };
  }

  private networkError(e: unknown, signal?: AbortSignal): Error {
    if (signal?.aborted) return signal.reason instanceof Error ? signal.reason : (e as Error);
    if (e instanceof SandtreeError) return e;
    const reason = (e as { cause?: unknown })?.cause;
    if (reason instanceof SandtreeError) return reason;
    return new SandtreeError("REGISTRY_UNREACHABLE", `registry ${this.opts.registry} unreachable: ${errMessage(e)}`, {
      registry: this.opts.registry,
      cause: errMessage(e),
    });
  }
}

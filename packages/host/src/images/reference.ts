import { SandtreeError } from "@sandtree/protocol";

/**
 * A parsed image reference, following the distribution reference grammar.
 *
 * `registry` is set only when the reference names one explicitly (its first component holds a
 * `.` or `:` or is `localhost`). Unqualified names such as `sandtree/busybox` or `alpine` are
 * looked up in the local store; the store decides whether they may fall back to a registry.
 */
export interface ImageReference {
  registry: string | undefined;
  /** The repository path, without registry; `library/` is added only for explicit docker.io. */
  repository: string;
  /** `latest` when neither a tag nor a digest was given. */
  tag: string | undefined;
  digest: string | undefined;
  /** `[registry/]repository[:tag][@digest]`: the key under which the store records the image. */
  canonical: string;
}

export const DOCKER_HUB = "docker.io";

const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const DOMAIN =
  /^(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\[[a-fA-F0-9:]+\])(?::[0-9]{1,5})?$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^sha256:[a-f0-9]{64}$/;
const MAX_NAME = 255;

function invalid(ref: string, why: string): SandtreeError {
  return new SandtreeError("VALIDATION_FAILED", `invalid image reference "${ref}": ${why}`, {
    ref,
  });
}

function looksLikeDomain(component: string): boolean {
  return component.includes(".") || component.includes(":") || component === "localhost" || component !== component.toLowerCase();
}

export function parseReference(input: string): ImageReference {
  if (typeof input !== "string" || input.length === 0) throw invalid(String(input), "empty");
  if (input.length > 512 || /\s/.test(input)) throw invalid(input, "malformed");
  let rest = input;
  let digest: string | undefined;
  const at = rest.lastIndexOf("@");
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) throw invalid(input, "digest must be sha256:<64 hex>");
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(":");
  if (colon > rest.lastIndexOf("/")) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) throw invalid(input, "bad tag");
  }
  const parts = rest.split("/");
  let registry: string | undefined;
  if (parts.length > 1 && looksLikeDomain(parts[0] ?? "")) {
    registry = parts.shift();
    if (registry === undefined || !DOMAIN.test(registry)) throw invalid(input, "bad registry host");
    if (registry === "index.docker.io" || registry === "registry-1.docker.io") registry = DOCKER_HUB;
  }
  if (parts.length === 0 || !parts.every((p) => COMPONENT.test(p))) {
    throw invalid(input, "repository must be lowercase [a-z0-9] components separated by / . _ -");
  }
  if (registry === DOCKER_HUB && parts.length === 1) parts.unshift("library");
  const repository = parts.join("/");
  if (repository.length + (registry?.length ?? 0) > MAX_NAME) throw invalid(input, "name too long");
  if (tag === undefined && digest === undefined) tag = "latest";
  const canonical = `${registry ? `${registry}/` : ""}${repository}${tag ? `:${tag}` : ""}${digest ? `@${digest}` : ""}`;
  return { registry, repository, tag, digest, canonical };
}

/** The repository path to ask `registry` for: Docker Hub keeps official images under library/. */
export function remoteRepository(ref: ImageReference, registry: string): string {
  if (registry === DOCKER_HUB && !ref.repository.includes("/")) return `library/${ref.repository}`;
  return ref.repository;
}

/** The `host[:port]` that actually serves the distribution API for `registry`. */
export function registryApiHost(registry: string): string {
  return registry === DOCKER_HUB ? "registry-1.docker.io" : registry;
}

/** Plain http for loopback registries (and when asked), https everywhere else. */
export function registryBaseUrl(registry: string, insecure = false): string {
  const host = registryApiHost(registry);
  const bare = host.startsWith("[") ? host.slice(0, host.indexOf("]") + 1) : host.split(":")[0];
  const loopback = bare === "localhost" || bare === "127.0.0.1" || bare === "[::1]";
  return `${insecure || loopback ? "http" : "https"}://${host}`;
}

import { access, rm } from "node:fs/promises";
import { join } from "node:path";
import { SandtreeError } from "@sandtree/protocol";
import { cacheDir } from "../paths.js";
import { BASE_FILE, type BaseMeta, buildBaseFromRootfs, buildBaseFromSource, readBaseMeta } from "./base-builder.js";
import { digestHex, sha256File } from "./digest.js";
import type { ImageSource, ResolvedManifest } from "./image-source.js";
import { OciLayoutSource } from "./oci-layout.js";
import { DEFAULT_PLATFORM, type ImageRuntimeConfig, type Platform } from "./oci-types.js";
import { type ImageReference, parseReference, remoteRepository } from "./reference.js";
import { type ImageOrigin, type RefRecord, RefsIndex } from "./refs-index.js";
import type { RegistryCredentials } from "./registry-auth.js";
import { RegistryClient } from "./registry-client.js";
import { SingleFlight } from "./single-flight.js";

export interface ImageStoreOptions {
  /** Default: `<cacheDir()>/images` (SANDTREE_CACHE_DIR, else $XDG_CACHE_HOME/sandtree or ~/.cache/sandtree). */
  root?: string;
  /**
   * Registry that unqualified names (`alpine`, `acme/tool`) fall back to when not in the store.
   * Default none: such names are local-only and fail fast (the server passes SANDTREE_DEFAULT_REGISTRY).
   */
  defaultRegistry?: string | null;
  /** Registries spoken to over plain http besides loopback (the server passes SANDTREE_INSECURE_REGISTRIES). */
  insecureRegistries?: string[];
  platform?: Platform;
  /** Deadline for each registry response's headers (ms). */
  requestTimeoutMs?: number;
  /** The HTTP client; a seam for proxies and request accounting. */
  fetch?: typeof fetch;
}

export interface ResolveOptions {
  credentials?: RegistryCredentials | undefined;
  /** `missing` (default) uses a stored image when there is one; `always` asks the registry again. */
  pull?: "missing" | "always";
  signal?: AbortSignal | undefined;
}

export interface StoredImage {
  ref: string;
  digest: string;
  /** The qcow2 base to put under a sandbox's overlay; never written to. */
  basePath: string;
  virtualSizeBytes: number;
  source: ImageOrigin;
  config: ImageRuntimeConfig;
}

export interface ImageInfo extends StoredImage {
  createdAt: string;
}

const LOCAL_NAMESPACE = "sandtree/";
const EMPTY_CONFIG: ImageRuntimeConfig = { env: [], entrypoint: [], cmd: [], workingDir: "/", user: "" };

export function defaultImageRoot(): string {
  return join(cacheDir(), "images");
}

/**
 * Images as qcow2 bases, cached by manifest digest under `blobs/sha256/<hex>/base.qcow2`, with
 * a ref → digest table in `refs.json`.
 *
 * Resolution rule: the store is always asked first. A reference with an explicit registry host
 * (`127.0.0.1:5000/app:1`, `ghcr.io/x/y`) is then pulled from it. An unqualified name goes to the
 * default registry only when one is configured, and names under `sandtree/` never leave the
 * store, so a typo like `nosuchimage` fails with IMAGE_NOT_FOUND without touching the network.
 */
export class ImageStore {
  readonly root: string;
  private readonly refs: RefsIndex;
  private readonly pulls = new SingleFlight<StoredImage>();
  private readonly builds = new SingleFlight<BaseMeta>();
  private readonly defaultRegistry: string | undefined;
  private readonly insecure: Set<string>;

  constructor(private readonly opts: ImageStoreOptions = {}) {
    this.root = opts.root ?? defaultImageRoot();
    this.refs = new RefsIndex(join(this.root, "refs.json"));
    this.defaultRegistry = opts.defaultRegistry ?? undefined;
    this.insecure = new Set(opts.insecureRegistries ?? []);
  }

  async resolve(refText: string, opts: ResolveOptions = {}): Promise<StoredImage> {
    const ref = parseReference(refText);
    if (opts.pull !== "always") {
      const local = await this.lookup(ref);
      if (local) return local;
    }
    const registry = this.registryFor(ref);
    const key = `${ref.canonical}\u0000${opts.credentials?.username ?? ""}`;
    return this.pulls.run(key, (signal) => this.pull(ref, registry, opts.credentials, signal), opts.signal);
  }

  /**
   * Fails fast with IMAGE_NOT_FOUND when the image is neither in the store nor in its registry;
   * fetches only the manifest, so a create can refuse a typo before any pull starts.
   */
  async check(refText: string, opts: Omit<ResolveOptions, "pull"> = {}): Promise<void> {
    const ref = parseReference(refText);
    if (await this.lookup(ref)) return;
    const registry = this.registryFor(ref);
    await this.manifestFor(ref, registry, opts.credentials, opts.signal ?? new AbortController().signal);
  }

  private registryFor(ref: ImageReference): string {
    const local = ref.registry === undefined && ref.repository.startsWith(LOCAL_NAMESPACE);
    const registry = ref.registry ?? (local ? undefined : this.defaultRegistry);
    if (registry === undefined) {
      const why = local
        ? `names under ${LOCAL_NAMESPACE} are built by setup or imported, never pulled`
        : `short names are local-only on this server (SANDTREE_DEFAULT_REGISTRY=none); name a registry (e.g. localhost:5000/${ref.canonical}) or have an admin alias it (sandtree image alias ${ref.canonical} IMAGE)`;
      throw new SandtreeError("IMAGE_NOT_FOUND", `image ${ref.canonical} is not in the local store: ${why}`, {
        ref: ref.canonical,
      });
    }
    return registry;
  }

  async list(): Promise<ImageInfo[]> {
    const out: ImageInfo[] = [];
    for (const record of (await this.refs.read()).values()) {
      const info = await this.describe(record);
      if (info) out.push(info);
    }
    return out;
  }

  /** Imports the image `layoutRef` (a ref name or digest; optional when the layout holds one) under `name`. */
  async importLayout(dir: string, name: string, opts: { layoutRef?: string; signal?: AbortSignal } = {}): Promise<StoredImage> {
    const ref = parseReference(name);
    const source = new OciLayoutSource(dir);
    const resolved = await source.resolveManifest(opts.layoutRef, {
      platform: this.opts.platform ?? DEFAULT_PLATFORM,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    const meta = await this.build(source, resolved, opts.signal);
    return this.record(ref.canonical, meta, "local");
  }

  /** Builds a base straight from a root filesystem directory (how setup makes sandtree/busybox). */
  async registerRootfs(
    dir: string,
    name: string,
    opts: { config?: Partial<ImageRuntimeConfig>; signal?: AbortSignal } = {},
  ): Promise<StoredImage> {
    const ref = parseReference(name);
    const meta = await buildBaseFromRootfs(
      dir,
      (path) => sha256File(path, opts.signal ? { signal: opts.signal } : {}),
      (digest) => this.blobDir(digest),
      { ...EMPTY_CONFIG, ...opts.config },
      { workRoot: this.workRoot(), signal: opts.signal },
    );
    return this.record(ref.canonical, meta, "local");
  }

  /**
   * Forgets `refText`; the base is deleted once no other ref points to it. Callers must not remove
   * an image whose base still backs a running sandbox's overlay.
   */
  async remove(refText: string): Promise<void> {
    const ref = parseReference(refText);
    const removed = await this.refs.update((refs) => {
      const record = refs.get(ref.canonical);
      if (!record) return undefined;
      refs.delete(ref.canonical);
      const stillUsed = [...refs.values()].some((r) => r.digest === record.digest);
      return { record, stillUsed };
    });
    if (!removed) throw new SandtreeError("IMAGE_NOT_FOUND", `image ${ref.canonical} is not in the local store`);
    if (!removed.stillUsed) await rm(this.blobDir(removed.record.digest), { recursive: true, force: true });
  }

  private async pull(
    ref: ImageReference,
    registry: string,
    credentials: RegistryCredentials | undefined,
    signal: AbortSignal,
  ): Promise<StoredImage> {
    const { client, resolved } = await this.manifestFor(ref, registry, credentials, signal);
    const meta = await this.build(client, resolved, signal);
    return this.record(ref.canonical, meta, "registry");
  }

  private async manifestFor(
    ref: ImageReference,
    registry: string,
    credentials: RegistryCredentials | undefined,
    signal: AbortSignal,
  ): Promise<{ client: RegistryClient; resolved: ResolvedManifest }> {
    const client = new RegistryClient({
      registry,
      repository: remoteRepository(ref, registry),
      credentials,
      insecure: this.insecure.has(registry),
      requestTimeoutMs: this.opts.requestTimeoutMs,
      fetch: this.opts.fetch,
    });
    let resolved: ResolvedManifest;
    try {
      resolved = await client.resolveManifest(ref.digest ?? ref.tag, {
        platform: this.opts.platform ?? DEFAULT_PLATFORM,
        signal,
      });
    } catch (e) {
      // An unreachable registry says nothing of the image: REGISTRY_UNREACHABLE, not IMAGE_NOT_FOUND.
      if (e instanceof SandtreeError && e.code === "REGISTRY_UNREACHABLE") {
        // A short name went to the default registry: say so, and how to point it elsewhere.
        const viaDefault =
          ref.registry === undefined
            ? ` (${ref.canonical} has no registry, so it was asked of the default registry ${registry}, as Docker does; set SANDTREE_DEFAULT_REGISTRY to another registry or to none, or have an admin alias the name: sandtree image alias NAME IMAGE)`
            : "";
        throw new SandtreeError("REGISTRY_UNREACHABLE", `cannot fetch ${ref.canonical}: ${e.message}${viaDefault}`, {
          ...e.details,
          ref: ref.canonical,
        });
      }
      throw e;
    }
    return { client, resolved };
  }

  private async build(source: ImageSource, resolved: ResolvedManifest, signal?: AbortSignal): Promise<BaseMeta> {
    const dir = this.blobDir(resolved.digest);
    const existing = await this.validBase(dir);
    if (existing) return existing;
    return this.builds.run(
      resolved.digest,
      (s) => buildBaseFromSource(source, resolved, dir, { workRoot: this.workRoot(), signal: s }),
      signal,
    );
  }

  private async lookup(ref: ImageReference): Promise<StoredImage | undefined> {
    const refs = await this.refs.read();
    const record = refs.get(ref.canonical);
    if (record) {
      const meta = await this.validBase(this.blobDir(record.digest));
      if (meta) return this.toResolved(record.ref, meta, record.source);
    }
    if (ref.digest === undefined) return undefined;
    // By digest, any stored image with that manifest digest will do.
    const meta = await this.validBase(this.blobDir(ref.digest));
    if (!meta) return undefined;
    const sameDigest = [...refs.values()].find((r) => r.digest === ref.digest);
    return this.toResolved(ref.canonical, meta, sameDigest?.source ?? "registry");
  }

  private async describe(record: RefRecord): Promise<ImageInfo | undefined> {
    const meta = await this.validBase(this.blobDir(record.digest));
    if (!meta) return undefined;
    return { ...this.toResolved(record.ref, meta, record.source), createdAt: record.createdAt };
  }

  private async record(ref: string, meta: BaseMeta, source: ImageOrigin): Promise<StoredImage> {
    await this.refs.update((refs) => {
      refs.set(ref, { ref, digest: meta.digest, source, createdAt: new Date().toISOString() });
    });
    return this.toResolved(ref, meta, source);
  }

  private toResolved(ref: string, meta: BaseMeta, source: ImageOrigin): StoredImage {
    return {
      ref,
      digest: meta.digest,
      basePath: this.baseFile(meta.digest),
      virtualSizeBytes: meta.virtualSizeBytes,
      source,
      config: meta.config,
    };
  }

  private async validBase(dir: string): Promise<BaseMeta | undefined> {
    const meta = await readBaseMeta(dir);
    if (!meta) return undefined;
    try {
      await access(join(dir, BASE_FILE));
      return meta;
    } catch {
      return undefined;
    }
  }

  /** Where the base of the image whose manifest digest is `digest` lies in the store (ResolvedImage.base names it so). */
  baseFile(digest: string): string {
    return join(this.blobDir(digest), BASE_FILE);
  }

  // sha256/<hex>, not sha256:<hex>: a colon in a backing-file path confuses qemu's protocol parsing.
  private blobDir(digest: string): string {
    return join(this.root, "blobs", "sha256", digestHex(digest));
  }

  private workRoot(): string {
    return join(this.root, "tmp");
  }
}

import { parseReference } from "@sandtree/host";
import { SandtreeError } from "@sandtree/protocol";
import type { ImageAliasRow, ImageAliasStore } from "../../store/image-aliases.js";
import type { ImageResolver } from "./image-resolver.js";

/**
 * The admin-set image alias table: a name users' code gives (`python:3.11-slim`, E2B's `base`)
 * stands for an image this host has or can pull. A create names the alias; the sandbox records
 * the target it resolved to, so a later change of the alias never changes a sandbox's disk. Names
 * are compared as Docker does: `python`, `python:latest`, `library/python` and
 * `docker.io/library/python:latest` are one name. Targets are not aliases again (one lookup).
 */
export class ImageAliases {
  constructor(
    private readonly store: ImageAliasStore,
    private readonly images: ImageResolver,
  ) {}

  /** The image a create of `ref` uses: the alias's target, or `ref` itself. */
  async resolve(ref: string): Promise<{ image: string; alias: string | null }> {
    let key: string;
    try {
      key = aliasKey(ref);
    } catch {
      // Not a valid reference: the image service refuses it with its own message.
      return { image: ref, alias: null };
    }
    const row = await this.store.getImageAlias(key);
    return row ? { image: row.target, alias: row.name } : { image: ref, alias: null };
  }

  list(): Promise<ImageAliasRow[]> {
    return this.store.listImageAliases();
  }

  /** Sets `name` to stand for `target`, which must resolve now (local, or in its registry). */
  async set(name: string, target: string, opts: { signal?: AbortSignal } = {}): Promise<ImageAliasRow> {
    const key = aliasKey(name);
    const canonicalTarget = parseReference(target).canonical;
    if (aliasKey(canonicalTarget) === key) {
      throw new SandtreeError("VALIDATION_FAILED", `image alias ${key} would name itself`, { field: "target" });
    }
    await this.images.check(canonicalTarget, opts.signal ? { signal: opts.signal } : {});
    return this.store.setImageAlias(key, canonicalTarget);
  }

  async delete(name: string): Promise<void> {
    const key = aliasKey(name);
    if (!(await this.store.deleteImageAlias(key))) {
      throw new SandtreeError("NOT_FOUND", `no image alias ${key}`, { name: key });
    }
  }
}

/** A reference as Docker compares it, Docker Hub's names in their short form (`python:3.11-slim`). */
export function aliasKey(ref: string): string {
  const parsed = parseReference(ref);
  if (parsed.registry !== undefined && parsed.registry !== "docker.io") return parsed.canonical;
  const parts = parsed.repository.split("/");
  const repository = parts.length === 2 && parts[0] === "library" ? parts[1] : parsed.repository;
  return `${repository}${parsed.tag ? `:${parsed.tag}` : ""}${parsed.digest ? `@${parsed.digest}` : ""}`;
}

/**
 * The image a create uses: an alias stands for its target from here on (the sandbox records, and
 * restarts from, the target). A restore's image comes from its checkpoint: no aliases there.
 */
export async function imageOfCreate(
  aliases: ImageAliases | undefined,
  params: { image: string; checkpoint_id?: string | undefined },
): Promise<{ image: string; alias: string | null }> {
  if (params.checkpoint_id || !aliases) return { image: params.image, alias: null };
  return aliases.resolve(params.image);
}

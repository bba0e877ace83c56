import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

export type ImageOrigin = "local" | "registry";

export interface RefRecord {
  /** The canonical reference the image is known by (`sandtree/busybox:latest`, `127.0.0.1:5000/x:1`). */
  ref: string;
  /** Manifest digest for pulled/imported images; sha256 of base.qcow2 for registered rootfs dirs. */
  digest: string;
  source: ImageOrigin;
  createdAt: string;
}

interface IndexFile {
  version: 1;
  refs: RefRecord[];
}

/**
 * The ref → digest table, persisted as JSON. Every write goes to a temp file that is renamed over
 * the old one; writers in this process are serialized, and each re-reads the file first.
 */
export class RefsIndex {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(readonly path: string) {}

  async read(): Promise<Map<string, RefRecord>> {
    let text: string;
    try {
      text = await readFile(this.path, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return new Map();
      throw e;
    }
    const parsed = JSON.parse(text) as Partial<IndexFile>;
    const refs = Array.isArray(parsed.refs) ? parsed.refs : [];
    return new Map(refs.filter((r) => typeof r?.ref === "string").map((r) => [r.ref, r]));
  }

  /** Applies `change` to the current table and persists it; returns what `change` returned. */
  update<T>(change: (refs: Map<string, RefRecord>) => T): Promise<T> {
    const run = async (): Promise<T> => {
      const refs = await this.read();
      const result = change(refs);
      const body: IndexFile = { version: 1, refs: [...refs.values()].sort((a, b) => a.ref.localeCompare(b.ref)) };
      await mkdir(dirname(this.path), { recursive: true });
      const tmp = `${this.path}.${randomBytes(6).toString("hex")}.tmp`;
      await writeFile(tmp, `${JSON.stringify(body, null, 2)}\n`);
      await rename(tmp, this.path);
      return result;
    };
    const next = this.queue.then(run, run);
    this.queue = next.catch(() => undefined);
    return next;
  }
}

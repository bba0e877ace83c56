import { randomBytes } from "node:crypto";
import path from "node:path";
import type { FileStat } from "@sandtree/protocol";
import { SandtreeError } from "@sandtree/protocol";
import type { SandboxService } from "../sandboxes/sandbox-service.js";
import type { FileService } from "./file-service.js";

/** A change seen in a watched directory; `name` is relative to it. */
export interface DirEvent {
  name: string;
  type: "create" | "write" | "remove" | "chmod";
  entry?: FileStat;
}

type Snapshot = Map<string, FileStat>;

/** How often a watched directory is listed again (the guest agent has no change notification). */
const POLL_MS = 200;
/** A recursive watch lists at most this many entries per pass. */
const MAX_ENTRIES = 10_000;
/** A polling watcher keeps at most this many undelivered events (the oldest go first). */
const MAX_PENDING = 10_000;

interface Watcher {
  teamId: string;
  sandboxId: string;
  pending: DirEvent[];
  stop: AbortController;
}

/**
 * Directory watches by polling: the directory (and, recursive, its subdirectories) is listed
 * every POLL_MS and compared with the last listing, so a change shows up within about that long
 * and changes undone between two listings are not seen. Streams end with the signal; polling
 * watchers (created, drained, removed by id) end with their sandbox.
 */
export class DirWatchService {
  private readonly watchers = new Map<string, Watcher>();

  constructor(
    private readonly files: FileService,
    sandboxes: SandboxService,
  ) {
    sandboxes.onTeardown((id) => {
      for (const [wid, w] of this.watchers) {
        if (w.sandboxId !== id) continue;
        w.stop.abort();
        this.watchers.delete(wid);
      }
    });
  }

  /** Lists the directory once (so a missing one fails here), then yields batches of changes. */
  async watch(
    teamId: string,
    sandboxId: string,
    dir: string,
    opts: { recursive: boolean; signal: AbortSignal },
  ): Promise<AsyncIterable<DirEvent[]>> {
    const st = await this.files.stat(teamId, sandboxId, dir);
    const root = st.path;
    if (st.type !== "dir") throw new SandtreeError("NOT_A_DIRECTORY", `${root} is not a directory`, { path: root });
    let last = await this.snapshot(teamId, sandboxId, root, opts.recursive);
    const self = this;
    return {
      async *[Symbol.asyncIterator]() {
        while (!opts.signal.aborted) {
          await sleep(POLL_MS, opts.signal);
          if (opts.signal.aborted) return;
          const next = await self.snapshot(teamId, sandboxId, root, opts.recursive);
          const events = diff(last, next);
          last = next;
          if (events.length > 0) yield events;
        }
      },
    };
  }

  async createWatcher(teamId: string, sandboxId: string, dir: string, recursive: boolean): Promise<string> {
    const stop = new AbortController();
    const events = await this.watch(teamId, sandboxId, dir, { recursive, signal: stop.signal });
    const id = `w-${randomBytes(8).toString("hex")}`;
    const w: Watcher = { teamId, sandboxId, pending: [], stop };
    this.watchers.set(id, w);
    void (async () => {
      try {
        for await (const batch of events) {
          w.pending.push(...batch);
          if (w.pending.length > MAX_PENDING) w.pending.splice(0, w.pending.length - MAX_PENDING);
        }
      } catch {
        // The sandbox ended or the directory went away: the watcher stays, with what it collected.
      }
    })();
    return id;
  }

  takeEvents(teamId: string, sandboxId: string, watcherId: string): DirEvent[] {
    const w = this.find(teamId, sandboxId, watcherId);
    return w.pending.splice(0);
  }

  removeWatcher(teamId: string, sandboxId: string, watcherId: string): void {
    this.find(teamId, sandboxId, watcherId).stop.abort();
    this.watchers.delete(watcherId);
  }

  private find(teamId: string, sandboxId: string, watcherId: string): Watcher {
    const w = this.watchers.get(watcherId);
    if (!w || w.teamId !== teamId || w.sandboxId !== sandboxId)
      throw new SandtreeError("NOT_FOUND", `watcher ${watcherId} not found`, { watcher_id: watcherId });
    return w;
  }

  private async snapshot(teamId: string, sandboxId: string, root: string, recursive: boolean): Promise<Snapshot> {
    const out: Snapshot = new Map();
    const queue = [root];
    while (queue.length > 0 && out.size < MAX_ENTRIES) {
      const dir = queue.shift() as string;
      let listed: { entries: FileStat[] };
      try {
        listed = await this.files.list(teamId, sandboxId, dir);
      } catch (err) {
        // A subdirectory removed between two listings is simply gone; the root must stay.
        if (dir === root) throw err;
        continue;
      }
      for (const e of listed.entries) {
        out.set(path.posix.relative(root, e.path), e);
        if (recursive && e.type === "dir") queue.push(e.path);
      }
    }
    return out;
  }
}

function diff(before: Snapshot, after: Snapshot): DirEvent[] {
  const events: DirEvent[] = [];
  for (const [name, e] of after) {
    const old = before.get(name);
    if (!old || old.type !== e.type) events.push({ name, type: "create", entry: e });
    else if (old.size !== e.size || old.mtime_ms !== e.mtime_ms) events.push({ name, type: "write", entry: e });
    else if (old.mode !== e.mode) events.push({ name, type: "chmod", entry: e });
  }
  for (const name of before.keys()) if (!after.has(name)) events.push({ name, type: "remove" });
  return events;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

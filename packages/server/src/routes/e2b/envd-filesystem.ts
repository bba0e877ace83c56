import path from "node:path";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { FileStat } from "@sandtree/protocol";
import {
  type EntryInfo,
  EntryInfoSchema,
  EventType,
  type Filesystem,
  type FilesystemEvent,
  FilesystemEventSchema,
  FileType,
  type WatchDirResponse,
  WatchDirResponseSchema,
} from "../../gen/filesystem/filesystem_pb.js";
import type { DirEvent } from "../../services/files/dir-watch-service.js";
import type { Services } from "../../services/services.js";
import { callerOf, envdError, keepaliveMs, rootOnly, withKeepalive } from "./envd-context.js";

const TYPES: Record<FileStat["type"], FileType> = {
  file: FileType.FILE,
  dir: FileType.DIRECTORY,
  symlink: FileType.SYMLINK,
  other: FileType.UNSPECIFIED,
};
const EVENTS: Record<DirEvent["type"], EventType> = {
  create: EventType.CREATE,
  write: EventType.WRITE,
  remove: EventType.REMOVE,
  chmod: EventType.CHMOD,
};

/** `-rwxr-xr-x` from a mode's low bits and the entry's type. */
function permissions(type: FileStat["type"], mode: number): string {
  const bits = "rwxrwxrwx".split("").map((ch, i) => (mode & (0o400 >> i) ? ch : "-"));
  return (type === "dir" ? "d" : type === "symlink" ? "l" : "-") + bits.join("");
}

/** A sandtree stat as envd's EntryInfo; owner and group are numeric ids (sandtree reads no user names). */
export function entryInfo(st: FileStat): EntryInfo {
  return create(EntryInfoSchema, {
    name: st.name ?? path.posix.basename(st.path),
    type: TYPES[st.type],
    path: st.path,
    size: BigInt(st.size),
    mode: st.mode,
    permissions: permissions(st.type, st.mode),
    owner: String(st.uid),
    group: String(st.gid),
    modifiedTime: timestampFromMs(Math.round(st.mtime_ms)),
    ...(st.target !== undefined ? { symlinkTarget: st.target } : {}),
  });
}

function fsEvent(e: DirEvent): FilesystemEvent {
  return create(FilesystemEventSchema, { name: e.name, type: EVENTS[e.type] });
}

async function mapped<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw envdError(err);
  }
}

/** envd's filesystem service over sandtree's file service (as root) and polled directory watches. */
export function filesystemService(s: Services): ServiceImpl<typeof Filesystem> {
  return {
    async stat(req, ctx) {
      const c = callerOf(ctx);
      rootOnly(c.user);
      return { entry: entryInfo(await s.files.stat(c.teamId, c.sandboxId, req.path)) };
    },

    async makeDir(req, ctx) {
      const c = callerOf(ctx);
      rootOnly(c.user);
      const exists = await s.files.stat(c.teamId, c.sandboxId, req.path).then(
        () => true,
        () => false,
      );
      if (exists) throw new ConnectError(`${req.path} already exists`, Code.AlreadyExists);
      return { entry: entryInfo(await s.files.mkdir(c.teamId, c.sandboxId, req.path, true, 0o755)) };
    },

    async move(req, ctx) {
      const c = callerOf(ctx);
      rootOnly(c.user);
      return { entry: entryInfo(await mapped(() => s.files.rename(c.teamId, c.sandboxId, req.source, req.destination))) };
    },

    async listDir(req, ctx) {
      const c = callerOf(ctx);
      rootOnly(c.user);
      const depth = Math.max(1, req.depth || 1);
      const entries: EntryInfo[] = [];
      let level = [req.path];
      for (let d = 1; d <= depth && level.length > 0; d++) {
        const next: string[] = [];
        for (const dir of level) {
          for (const e of (await s.files.list(c.teamId, c.sandboxId, dir)).entries) {
            entries.push(entryInfo(e));
            if (e.type === "dir") next.push(e.path);
          }
        }
        level = next;
      }
      return { entries };
    },

    async remove(req, ctx) {
      const c = callerOf(ctx);
      rootOnly(c.user);
      await s.files.remove(c.teamId, c.sandboxId, req.path, true);
      return {};
    },

    async *watchDir(req, ctx): AsyncGenerator<WatchDirResponse> {
      const c = callerOf(ctx);
      rootOnly(c.user);
      if (req.includeEntry || req.allowNetworkMounts)
        throw new ConnectError("includeEntry and allowNetworkMounts are not supported", Code.Unimplemented);
      const batches = await s.dirWatch.watch(c.teamId, c.sandboxId, req.path, { recursive: req.recursive, signal: ctx.signal });
      yield create(WatchDirResponseSchema, { event: { case: "start", value: {} } });
      for await (const batch of withKeepalive(batches, keepaliveMs(ctx), ctx.signal)) {
        if (batch === "keepalive") yield create(WatchDirResponseSchema, { event: { case: "keepalive", value: {} } });
        else for (const e of batch) yield create(WatchDirResponseSchema, { event: { case: "filesystem", value: fsEvent(e) } });
      }
    },

    async createWatcher(req, ctx) {
      const c = callerOf(ctx);
      rootOnly(c.user);
      if (req.includeEntry || req.allowNetworkMounts)
        throw new ConnectError("includeEntry and allowNetworkMounts are not supported", Code.Unimplemented);
      return { watcherId: await s.dirWatch.createWatcher(c.teamId, c.sandboxId, req.path, req.recursive) };
    },

    async getWatcherEvents(req, ctx) {
      const c = callerOf(ctx);
      return { events: s.dirWatch.takeEvents(c.teamId, c.sandboxId, req.watcherId).map(fsEvent) };
    },

    async removeWatcher(req, ctx) {
      const c = callerOf(ctx);
      s.dirWatch.removeWatcher(c.teamId, c.sandboxId, req.watcherId);
      return {};
    },
  };
}

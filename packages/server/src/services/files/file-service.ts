import path from "node:path";
import { toSandtreeError } from "@sandtree/host";
import { type FileStat, SandtreeError } from "@sandtree/protocol";
import { HeadBuffer } from "../commands/output-spill.js";
import type { SandboxService } from "../sandboxes/sandbox-service.js";

/** Normalises a user path to an absolute guest path; refuses NUL and empty paths. */
export function guestPath(p: string): string {
  if (p.length === 0 || p.includes("\0"))
    throw new SandtreeError("INVALID_PATH", "path must be non-empty without NUL", { field: "path" });
  // The guest resolves inside its own root; normalising keeps `..` from climbing above "/".
  return path.posix.normalize(path.posix.join("/", p));
}

/** A guest error as the API's, its message naming the path ("/x: No such file or directory"). */
function fileError(err: unknown, p: string): unknown {
  const e = toSandtreeError(err, p);
  if (!(e instanceof SandtreeError) || e.message.includes(p)) return e;
  return new SandtreeError(e.code, `${p}: ${e.message}`, e.details);
}

async function mapErrors<T>(p: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw fileError(err, p);
  }
}

export class FileService {
  constructor(private readonly sandboxes: SandboxService) {}

  async upload(teamId: string, id: string, p: string, body: AsyncIterable<Uint8Array>, mode?: number) {
    const gp = guestPath(p);
    const vm = await this.sandboxes.running(teamId, id);
    const res = await mapErrors(gp, () => vm.writeFile(gp, body, mode !== undefined ? { mode } : {}));
    return { path: gp, bytes: res.bytes };
  }

  /** Checks the file is readable first, so a missing file is a 404 before any byte is sent. */
  async download(teamId: string, id: string, p: string, opts: { offset?: number; length?: number; signal?: AbortSignal }) {
    const gp = guestPath(p);
    const vm = await this.sandboxes.running(teamId, id);
    const st = await mapErrors(gp, () => vm.stat(gp));
    if (st.type === "dir") throw new SandtreeError("IS_A_DIRECTORY", `${gp} is a directory`, { path: gp });
    const offset = opts.offset ?? 0;
    const size = Math.max(0, Math.min(st.size - offset, opts.length ?? Number.POSITIVE_INFINITY));
    // The size answered is the stat's: never more bytes than that (a file that grew since is cut there).
    const stream = vm.readFile(gp, { ...opts, length: size });
    return {
      size,
      chunks: (async function* () {
        try {
          yield* stream;
        } catch (err) {
          throw fileError(err, gp);
        }
      })(),
    };
  }

  async stat(teamId: string, id: string, p: string): Promise<FileStat> {
    const gp = guestPath(p);
    const vm = await this.sandboxes.running(teamId, id);
    const st = await mapErrors(gp, () => vm.stat(gp));
    return { path: gp, ...st };
  }

  async list(teamId: string, id: string, p: string) {
    const gp = guestPath(p);
    const vm = await this.sandboxes.running(teamId, id);
    const entries = await mapErrors(gp, () => vm.list(gp));
    return {
      path: gp,
      entries: entries.map((e) => ({ ...e, path: path.posix.join(gp, e.name ?? "") })),
    };
  }

  async mkdir(teamId: string, id: string, p: string, parents: boolean, mode: number): Promise<FileStat> {
    const gp = guestPath(p);
    const vm = await this.sandboxes.running(teamId, id);
    await mapErrors(gp, () => vm.mkdir(gp, { parents, mode }));
    return { path: gp, ...(await mapErrors(gp, () => vm.stat(gp))) };
  }

  async remove(teamId: string, id: string, p: string, recursive: boolean): Promise<void> {
    const gp = guestPath(p);
    if (gp === "/") throw new SandtreeError("INVALID_PATH", "refusing to remove /", { path: gp });
    const vm = await this.sandboxes.running(teamId, id);
    await mapErrors(gp, () => vm.remove(gp, { recursive }));
  }

  /** Renames (moves) a file or directory in the guest; the destination's parent must exist. */
  async rename(teamId: string, id: string, from: string, to: string): Promise<FileStat> {
    const src = guestPath(from);
    const dst = guestPath(to);
    const vm = await this.sandboxes.running(teamId, id);
    await mapErrors(src, () => vm.stat(src));
    const exec = vm.exec({ argv: ["mv", "--", src, dst], timeoutMs: 60_000 });
    // mv's message is a line; a guest's flood in its place is kept to 64 KiB.
    const errors = new HeadBuffer(64 * 1024);
    let code = -1;
    for await (const ev of exec.events) {
      if (ev.type === "stderr") errors.push(ev.data);
      else if (ev.type === "exit") code = ev.info.exit_code;
    }
    const stderr = errors.take();
    if (code !== 0) {
      const missing = /no such file|not found/i.test(stderr);
      throw new SandtreeError(missing ? "FILE_NOT_FOUND" : "GUEST_ERROR", `mv ${src} ${dst}: ${stderr.trim()}`, { path: dst });
    }
    return { path: dst, ...(await mapErrors(dst, () => vm.stat(dst))) };
  }
}

import path from "node:path";
import type { StatInfo } from "../agent/agent-types.js";
import { GuestError } from "../agent/guest-error.js";

/** A guest filesystem as a map: file path -> content; directories are those named, and parents of files. */
export class FakeFiles {
  readonly dirs = new Set<string>(["/", "/root", "/tmp", "/dev/shm"]);
  constructor(readonly files: Map<string, Buffer>) {
    for (const f of files.keys()) this.addParents(f);
  }

  private addParents(p: string): void {
    for (let d = path.posix.dirname(p); !this.dirs.has(d); d = path.posix.dirname(d)) this.dirs.add(d);
  }

  static norm(p: string, cwd = "/root"): string {
    return path.posix.resolve(cwd, p);
  }

  read(p: string): Buffer | undefined {
    return this.files.get(FakeFiles.norm(p));
  }

  write(p: string, data: Buffer, append: boolean): void {
    const f = FakeFiles.norm(p);
    if (this.dirs.has(f)) throw new GuestError("EISDIR", 21, `${f}: Is a directory`);
    const old = append ? this.files.get(f) : undefined;
    this.files.set(f, old ? Buffer.concat([old, data]) : data);
    this.addParents(f);
  }

  stat(p: string): StatInfo {
    const f = FakeFiles.norm(p);
    const data = this.files.get(f);
    const base = { name: path.posix.basename(f), uid: 0, gid: 0, mtime_ms: Date.now() };
    if (data) return { ...base, type: "file", size: data.length, mode: 0o644 };
    if (this.dirs.has(f)) return { ...base, type: "dir", size: 4096, mode: 0o755 };
    throw new GuestError("ENOENT", 2, `${f}: No such file or directory`);
  }

  list(p: string): StatInfo[] {
    const dir = FakeFiles.norm(p);
    if (this.stat(dir).type !== "dir") throw new GuestError("ENOTDIR", 20, `${dir}: Not a directory`);
    const names = new Set<string>();
    for (const f of [...this.files.keys(), ...this.dirs]) {
      if (f !== dir && path.posix.dirname(f) === dir) names.add(f);
    }
    return [...names].sort().map((f) => this.stat(f));
  }

  mkdir(p: string, parents: boolean): void {
    const d = FakeFiles.norm(p);
    if (this.dirs.has(d)) {
      if (parents) return;
      throw new GuestError("EEXIST", 17, `${d}: File exists`);
    }
    if (!parents && !this.dirs.has(path.posix.dirname(d))) throw new GuestError("ENOENT", 2, `${d}: No such file or directory`);
    this.dirs.add(d);
    this.addParents(d);
  }

  remove(p: string, recursive: boolean): void {
    const f = FakeFiles.norm(p);
    if (this.files.delete(f)) return;
    if (!this.dirs.has(f)) throw new GuestError("ENOENT", 2, `${f}: No such file or directory`);
    const inside = [...this.files.keys(), ...this.dirs].filter((x) => x.startsWith(`${f}/`));
    if (inside.length > 0 && !recursive) throw new GuestError("ENOTEMPTY", 39, `${f}: Directory not empty`);
    for (const x of inside) {
      this.files.delete(x);
      this.dirs.delete(x);
    }
    this.dirs.delete(f);
  }
}

// The volume file API with no sandbox, and its paths tested as an attacker: a guest can put
// anything in a volume (symlinks pointing out, fifos, device nodes) and swap it while the API
// walks; nothing outside the volume is ever read, written or removed.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

let t: TestServer;
let vol: { id: string };
let dir: string;
/** A host directory outside every volume, with a file an escape would reach. */
let outside: string;
beforeAll(async () => {
  t = await startTestServer();
  vol = (await t.api("POST", "/v1/volumes", { name: "files", size_gb: 1 })).body;
  dir = path.join(t.dataDir, "volumes", vol.id, "data");
  outside = path.join(tmpdir(), `sandtree-outside-${process.pid}`);
  mkdirSync(outside, { recursive: true });
  writeFileSync(path.join(outside, "secret"), "host secret");
});
afterAll(async () => {
  await t?.close();
  rmSync(outside, { recursive: true, force: true });
});

const bytes = (s: string) => new TextEncoder().encode(s);
const f = (route: string, p: string, extra = "") => `/v1/volumes/${vol.id}/${route}?path=${encodeURIComponent(p)}${extra}`;

describe("the file API of a volume", () => {
  it("uploads, downloads (ranges too), stats, lists, makes directories and removes, as a sandbox's files", async () => {
    // Parents are created, as for a sandbox's files.
    expect((await t.api("PUT", f("files", "/docs/made/b.txt"), bytes("b"))).status).toBe(200);
    expect((await t.api("POST", `/v1/volumes/${vol.id}/files/mkdir`, { path: "/docs/deep/er" })).status).toBe(201);
    expect((await t.api("POST", `/v1/volumes/${vol.id}/files/mkdir`, { path: "/docs", parents: false })).body.code).toBe(
      "ALREADY_EXISTS",
    );
    expect((await t.api("PUT", f("files", "docs/a.txt", "&mode=600"), bytes("hello volume"))).body).toEqual({
      path: "/docs/a.txt",
      bytes: 12,
    });
    expect(readFileSync(path.join(dir, "docs/a.txt"), "utf8")).toBe("hello volume");
    expect((await t.api("GET", f("files", "/docs/a.txt"))).body).toBe("hello volume");
    expect((await t.api("GET", f("files", "/docs/a.txt", "&offset=6&length=3"))).body).toBe("vol");
    expect((await t.api("GET", f("files/stat", "/docs/a.txt"))).body).toMatchObject({
      path: "/docs/a.txt",
      type: "file",
      size: 12,
      mode: 0o600,
    });
    const list = await t.api("GET", f("files/list", "/docs"));
    expect(list.body.entries.map((e: { path: string; type: string }) => [e.path, e.type])).toEqual([
      ["/docs/a.txt", "file"],
      ["/docs/deep", "dir"],
      ["/docs/made", "dir"],
    ]);
    expect((await t.api("GET", f("files", "/docs"))).body.code).toBe("IS_A_DIRECTORY");
    expect((await t.api("GET", f("files", "/nope"))).body.code).toBe("FILE_NOT_FOUND");
    expect((await t.api("DELETE", f("files", "/docs"))).body.code).toBe("DIRECTORY_NOT_EMPTY");
    expect((await t.api("DELETE", f("files", "/docs", "&recursive=true"))).status).toBe(204);
    expect(existsSync(path.join(dir, "docs"))).toBe(false);
    expect((await t.api("DELETE", f("files", "/"))).body.code).toBe("INVALID_PATH");
  });

  it("measures the bytes used, and a write past size_gb is refused with no partial file left", async () => {
    const small = (await t.api("POST", "/v1/volumes", { name: "tiny", size_gb: 1 })).body;
    const at = (p: string) => `/v1/volumes/${small.id}/files?path=${p}`;
    const kib = new Uint8Array(1024).fill(7);
    expect((await t.api("PUT", at("/one"), kib)).status).toBe(200);
    expect((await t.api("GET", `/v1/volumes/${small.id}`)).body.used_bytes).toBe(1024);
    // Replacing a file counts its new size only.
    expect((await t.api("PUT", at("/one"), kib)).status).toBe(200);
    // What a guest wrote counts too: a sparse file leaves 100 bytes of the GiB.
    const vdir = path.join(t.dataDir, "volumes", small.id, "data");
    writeFileSync(path.join(vdir, "guest"), "");
    truncateSync(path.join(vdir, "guest"), 1024 ** 3 - 1024 - 100);
    expect((await t.api("PUT", at("/fits"), new Uint8Array(100))).status).toBe(200);
    const over = await t.api("PUT", at("/over"), new Uint8Array(1));
    expect([over.status, over.body.code]).toEqual([507, "VOLUME_FULL"]);
    // A replacement that grows a file past the size is refused and leaves the old content.
    expect((await t.api("PUT", at("/one"), new Uint8Array(1025))).body.code).toBe("VOLUME_FULL");
    expect(readdirSync(vdir).sort()).toEqual(["fits", "guest", "one"]);
    expect(readFileSync(path.join(vdir, "one"))).toEqual(Buffer.from(kib));
    expect((await t.api("GET", `/v1/volumes/${small.id}`)).body.used_bytes).toBe(1024 ** 3);
  });
});

describe("paths an attacker tries", () => {
  it("'..' and NUL are refused, absolute paths name files inside the volume", async () => {
    for (const p of ["../../../etc/passwd", "/a/../../x", "..", "a/.."]) {
      const r = await t.api("GET", f("files", p));
      expect([p, r.status, r.body.code]).toEqual([p, 400, "INVALID_PATH"]);
      expect((await t.api("PUT", f("files", p), bytes("x"))).body.code).toBe("INVALID_PATH");
    }
    expect((await t.api("GET", `/v1/volumes/${vol.id}/files?path=a%00b`)).status).toBe(400);
    // "/etc/passwd" is the volume's /etc/passwd (missing), never the host's.
    expect((await t.api("GET", f("files", "/etc/passwd"))).body.code).toBe("FILE_NOT_FOUND");
  });

  it("symlinks a guest left (to a file, to a directory, absolute or relative) are never followed", async () => {
    symlinkSync(path.join(outside, "secret"), path.join(dir, "to-secret"));
    symlinkSync(outside, path.join(dir, "to-dir"));
    symlinkSync("../../../..", path.join(dir, "up"));
    for (const p of ["/to-secret", "/to-dir/secret", "/up/etc/passwd"]) {
      const r = await t.api("GET", f("files", p));
      expect([p, r.status, r.body.code]).toEqual([p, 400, "UNSAFE_PATH"]);
    }
    expect((await t.api("PUT", f("files", "/to-secret"), bytes("pwned"))).body.code).toBe("UNSAFE_PATH");
    expect((await t.api("PUT", f("files", "/to-dir/new"), bytes("pwned"))).body.code).toBe("UNSAFE_PATH");
    expect((await t.api("POST", `/v1/volumes/${vol.id}/files/mkdir`, { path: "/to-dir/sub" })).body.code).toBe("UNSAFE_PATH");
    expect((await t.api("GET", f("files/list", "/to-dir"))).body.code).toBe("UNSAFE_PATH");
    expect((await t.api("DELETE", f("files", "/to-dir/secret"))).body.code).toBe("UNSAFE_PATH");
    // Listing shows a link as a link; stat does not follow it; removing removes the link only.
    const list = await t.api("GET", f("files/list", "/"));
    expect(list.body.entries.find((e: { name: string }) => e.name === "to-dir")).toMatchObject({
      type: "symlink",
      target: outside,
    });
    expect((await t.api("GET", f("files/stat", "/to-secret"))).body).toMatchObject({ type: "symlink" });
    expect((await t.api("DELETE", f("files", "/to-dir", "&recursive=true"))).status).toBe(204);
    expect(readFileSync(path.join(outside, "secret"), "utf8")).toBe("host secret");
    expect(existsSync(outside)).toBe(true);
    // A recursive delete of a tree holding a link out removes the link, not what it points at.
    mkdirSync(path.join(dir, "tree"));
    symlinkSync(outside, path.join(dir, "tree", "out"));
    expect((await t.api("DELETE", f("files", "/tree", "&recursive=true"))).status).toBe(204);
    expect(readFileSync(path.join(outside, "secret"), "utf8")).toBe("host secret");
    // The volume's bytes never count what a link points at.
    expect((await t.api("GET", `/v1/volumes/${vol.id}`)).body.used_bytes).toBeLessThan(100);
  });

  it("fifos and device nodes are refused without being opened (a fifo would block the read)", async () => {
    execFileSync("mkfifo", [path.join(dir, "pipe")]);
    const r = await t.api("GET", f("files", "/pipe"));
    expect([r.status, r.body.code, r.body.details?.kind]).toEqual([400, "UNSAFE_PATH", "fifo"]);
    expect((await t.api("PUT", f("files", "/pipe"), bytes("x"))).body.code).toBe("UNSAFE_PATH");
    let madeDevice = true;
    try {
      execFileSync("mknod", [path.join(dir, "null"), "c", "1", "3"]);
    } catch {
      madeDevice = false; // not root: the fifo case covers the rule
    }
    if (madeDevice) {
      const d = await t.api("GET", f("files", "/null"));
      expect([d.status, d.body.code, d.body.details?.kind]).toEqual([400, "UNSAFE_PATH", "device file"]);
    }
    expect((await t.api("DELETE", f("files", "/pipe"))).status).toBe(204);
  });

  it("a directory swapped for a symlink out while uploads and downloads run never lets one through", async () => {
    mkdirSync(path.join(dir, "swap"));
    writeFileSync(path.join(dir, "swap", "f"), "inside");
    writeFileSync(path.join(outside, "f"), "host secret");
    symlinkSync(outside, path.join(dir, "alt"));
    // The attacker, in its own process: atomically exchanges /swap (the real directory) and /alt (a
    // symlink out) with renameat2(RENAME_EXCHANGE), over and over: /swap always exists, as one or the other.
    const flip = [
      "import ctypes, os, sys, time",
      "libc = ctypes.CDLL(None, use_errno=True)",
      "os.chdir(sys.argv[1])",
      "while True:",
      "    libc.renameat2(-100, b'swap', -100, b'alt', 2)",
      "    time.sleep(0.001)",
    ].join("\n");
    const flipper = spawn("/usr/bin/python3", ["-c", flip, dir], { stdio: "ignore" });
    const seen = new Set<string>();
    try {
      // Until both sides of the flip were seen (the race was run), at least 100 rounds.
      for (let i = 0; i < 5000 && (i < 100 || !seen.has("inside") || !seen.has("UNSAFE_PATH")); i++) {
        const r = await t.api("GET", f("files", "/swap/f"));
        seen.add(r.status === 200 ? String(r.body) : r.body.code);
        await t.api("PUT", f("files", "/swap/w"), bytes("from the api"));
      }
    } finally {
      flipper.kill("SIGKILL");
    }
    // Only ever the volume's own file or a refusal: never the host's.
    expect([...seen].sort()).toEqual(["UNSAFE_PATH", "inside"]);
    expect(existsSync(path.join(outside, "w"))).toBe(false);
    expect(readFileSync(path.join(outside, "f"), "utf8")).toBe("host secret");
  });
});

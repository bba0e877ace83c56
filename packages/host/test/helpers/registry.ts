// Test helpers for the image subsystem: a real docker-registry on loopback, an optional
// bearer-token proxy in front of it, skopeo pushes, fixture rootfs trees and ext4 inspection.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, request, type ServerResponse } from "node:http";
import { createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const execFileP = promisify(execFile);

export async function run(argv: string[], input?: string): Promise<string> {
  const [file, ...args] = argv;
  if (!file) throw new Error("empty argv");
  if (input === undefined) {
    const { stdout } = await execFileP(file, args, { maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  }
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`${file} exited ${code}: ${err}`))));
    child.stdin.end(input);
  });
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createNetServer();
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

export interface TestRegistry {
  /** `127.0.0.1:PORT` */
  host: string;
  stop(): Promise<void>;
}

export interface RegistryOptions {
  /** Require HTTP basic auth (htpasswd, bcrypt) with these credentials. */
  basicAuth?: { username: string; password: string };
}

/** Starts Debian's docker-registry (distribution 2.8) on a random loopback port. */
export async function startRegistry(opts: RegistryOptions = {}): Promise<TestRegistry> {
  const dir = await mkdtemp(join(tmpdir(), "sandtree-registry-"));
  const port = await freePort();
  let auth = "";
  if (opts.basicAuth) {
    // libxcrypt's crypt(3) makes bcrypt ($2b$) hashes, which distribution's htpasswd accepts.
    const hash = (
      await run([
        "python3",
        "-W",
        "ignore",
        "-c",
        "import crypt,sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))",
        opts.basicAuth.password,
      ])
    ).trim();
    await writeFile(join(dir, "htpasswd"), `${opts.basicAuth.username}:${hash}\n`);
    auth = `auth:\n  htpasswd:\n    realm: sandtree-test\n    path: ${join(dir, "htpasswd")}\n`;
  }
  const config = `version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: ${join(dir, "data")}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:${port}
${auth}`;
  await writeFile(join(dir, "config.yml"), config);
  const child: ChildProcess = spawn("docker-registry", ["serve", join(dir, "config.yml")], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  const host = `127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited: ${stderr}`);
    const ok = await fetch(`http://${host}/v2/`).then(
      (r) => r.status === 200 || r.status === 401,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`docker-registry did not start: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    host,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
        if (child.exitCode === null) child.kill("SIGKILL");
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface BearerProxy {
  host: string;
  /** Token requests seen, with the Authorization header each carried. */
  tokenRequests: { authorization: string | undefined; scope: string | null }[];
  stop(): Promise<void>;
}

/**
 * An HTTP proxy in front of a real registry that speaks the docker token protocol: /v2/ requests
 * need `Bearer <token>`, tokens come from /token, which demands basic credentials when given.
 */
export async function startBearerProxy(
  upstream: string,
  credentials?: { username: string; password: string },
): Promise<BearerProxy> {
  const token = randomBytes(16).toString("hex");
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  const tokenRequests: BearerProxy["tokenRequests"] = [];
  const expectedBasic = credentials
    ? `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64")}`
    : undefined;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", `http://${host}`);
    if (url.pathname === "/token") {
      tokenRequests.push({ authorization: req.headers.authorization, scope: url.searchParams.get("scope") });
      if (expectedBasic && req.headers.authorization !== expectedBasic) {
        res.writeHead(401).end();
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ token }));
      return;
    }
    if (req.headers.authorization !== `Bearer ${token}`) {
      const repo = /^\/v2\/(.+)\/(manifests|blobs)\//.exec(url.pathname)?.[1] ?? "";
      res
        .writeHead(401, {
          "www-authenticate": `Bearer realm="http://${host}/token",service="sandtree-test",scope="repository:${repo}:pull"`,
          "content-type": "application/json",
        })
        .end('{"errors":[{"code":"UNAUTHORIZED"}]}');
      return;
    }
    const { authorization: _drop, host: _host, ...headers } = req.headers;
    const up = request(`http://${upstream}${req.url ?? "/"}`, { method: req.method, headers }, (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
    });
    up.on("error", () => res.writeHead(502).end());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    host,
    tokenRequests,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** `skopeo copy oci:LAYOUT:TAG docker://HOST/NAME:TAG` (with `--all` for indexes). */
export async function pushLayout(
  layout: string,
  layoutTag: string,
  dest: string,
  opts: { all?: boolean; creds?: { username: string; password: string }; format?: "v2s2" } = {},
): Promise<void> {
  const args = ["skopeo", "copy", "--quiet", "--dest-tls-verify=false"];
  // Converting to Docker's manifest format necessarily changes digests.
  if (opts.format) args.push("--format", opts.format);
  else args.push("--preserve-digests");
  if (opts.all) args.push("--all");
  if (opts.creds) args.push("--dest-creds", `${opts.creds.username}:${opts.creds.password}`);
  args.push(`oci:${layout}:${layoutTag}`, `docker://${dest}`);
  await run(args);
}

/** Creates files from a map: `path -> content` or `{content, mode, uid, gid}`; `null` makes a dir. */
export type TreeSpec = Record<
  string,
  string | null | { content?: string; mode?: number; uid?: number; gid?: number; symlink?: string }
>;

export async function makeTree(root: string, spec: TreeSpec): Promise<string> {
  const { chmod, chown, symlink } = await import("node:fs/promises");
  await mkdir(root, { recursive: true });
  for (const [rel, value] of Object.entries(spec)) {
    const path = join(root, rel);
    await mkdir(join(path, ".."), { recursive: true });
    if (value === null) {
      await mkdir(path, { recursive: true });
      continue;
    }
    if (typeof value === "string") {
      await writeFile(path, value);
      continue;
    }
    if (value.symlink !== undefined) {
      await symlink(value.symlink, path);
      continue;
    }
    if (value.content === undefined) await mkdir(path, { recursive: true });
    else await writeFile(path, value.content);
    if (value.mode !== undefined) await chmod(path, value.mode);
    if (value.uid !== undefined || value.gid !== undefined) await chown(path, value.uid ?? 0, value.gid ?? 0);
  }
  return root;
}

export interface Ext4Entry {
  type: string;
  mode: number;
  uid: number;
  gid: number;
}

/** A raw copy of a qcow2 base, read with debugfs (no mounting, no root tricks). */
export class Ext4Reader {
  private constructor(readonly rawPath: string) {}

  static async open(qcow2: string, scratch: string): Promise<Ext4Reader> {
    const raw = join(scratch, `${randomBytes(4).toString("hex")}.raw`);
    await run(["qemu-img", "convert", "-f", "qcow2", "-O", "raw", qcow2, raw]);
    return new Ext4Reader(raw);
  }

  private debugfs(cmd: string): Promise<string> {
    return run(["debugfs", "-R", cmd, this.rawPath]);
  }

  async stat(path: string): Promise<Ext4Entry | undefined> {
    const out = await this.debugfs(`stat "${path}"`);
    const m = /Type:\s+(\S+)\s+Mode:\s+([0-7]+)/.exec(out);
    const u = /User:\s+(\d+)\s+Group:\s+(\d+)/.exec(out);
    if (!m || !u) return undefined;
    return { type: m[1] ?? "", mode: Number.parseInt(m[2] ?? "0", 8), uid: Number(u[1]), gid: Number(u[2]) };
  }

  async cat(path: string): Promise<string> {
    return this.debugfs(`cat "${path}"`);
  }

  async ls(path: string): Promise<string[]> {
    // `ls -p` prints /inode/mode/uid/gid/name/size/ per entry.
    const out = await this.debugfs(`ls -p "${path}"`);
    return out
      .split("\n")
      .map((line) => line.split("/")[5])
      .filter((n): n is string => n !== undefined && n !== "" && n !== "." && n !== "..");
  }

  async label(): Promise<string> {
    const out = await run(["dumpe2fs", "-h", this.rawPath]).catch(() => "");
    return /Filesystem volume name:\s+(\S+)/.exec(out)?.[1] ?? "";
  }
}

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";

// A real, throwaway PostgreSQL server for tests: Debian's postgresql-15 binaries (installed by
// scripts/setup-packages.sh), a fresh cluster in a temporary directory (initdb), listening on a
// free loopback port, its socket in that directory. PostgreSQL refuses to run as root, so as
// root the cluster belongs to, and the server runs as, the `postgres` user the package created.
// It never touches the system's own cluster. Stop it with stop() (by PID; the directory goes too).

/** The newest PostgreSQL under Debian's /usr/lib/postgresql/VERSION/bin that has initdb. */
function binDir(): string {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => /^\d+$/.test(v) && existsSync(path.join(root, v, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  const v = versions[0];
  if (!v) throw new Error("PostgreSQL is not installed (scripts/setup-packages.sh installs postgresql-15)");
  return path.join(root, v, "bin");
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === "object" && addr ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

export interface PgServer {
  /** postgres://postgres@127.0.0.1:PORT/NAME */
  url(database: string): string;
  /** Creates an empty database; answers its URL. */
  createDatabase(name: string): Promise<string>;
  dropDatabase(name: string): Promise<void>;
  /**
   * Creates an empty schema in a database; answers a URL whose connections use it
   * (`search_path`): a fresh, isolated store for the price of a CREATE SCHEMA.
   */
  createSchema(database: string, name: string): Promise<string>;
  dropSchema(database: string, name: string): Promise<void>;
  readonly pid: number;
  stop(): Promise<void>;
}

export async function startPostgres(): Promise<PgServer> {
  const bin = binDir();
  const dir = mkdtempSync(path.join(tmpdir(), "sandtree-pg-"));
  const data = path.join(dir, "data");
  // As root: become `postgres` (setpriv execs, so the PID we hold is the server's own).
  const asRoot = process.getuid?.() === 0;
  let prefix: string[] = [];
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    chownSync(dir, uid, gid);
    chmodSync(dir, 0o700);
    prefix = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"];
  }
  const cmd = (argv: string[]): [string, string[]] => {
    const full = [...prefix, ...argv];
    return [full[0] as string, full.slice(1)];
  };
  execFileSync(
    ...cmd([path.join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"]),
    { stdio: "pipe" },
  );
  const port = await freePort();
  // No durability needed for tests: fsync off makes CREATE DATABASE and commits cheap.
  const [file, args] = cmd([
    path.join(bin, "postgres"),
    "-D",
    data,
    "-k",
    dir,
    "-p",
    String(port),
    "-c",
    "listen_addresses=127.0.0.1",
    "-c",
    "fsync=off",
    "-c",
    "synchronous_commit=off",
    "-c",
    "full_page_writes=off",
    "-c",
    "max_connections=200",
  ]);
  const child: ChildProcess = spawn(file, args, { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr?.on("data", (d: Buffer) => {
    log = (log + d.toString()).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const pid = child.pid;
  if (pid === undefined) throw new Error("postgres did not start");
  const kill = () => {
    try {
      process.kill(pid, "SIGINT");
    } catch {}
  };
  process.once("exit", kill);

  const url = (db: string) => `postgres://postgres@127.0.0.1:${port}/${db}`;
  const admin = async <T>(fn: (c: pg.Client) => Promise<T>, database = "postgres"): Promise<T> => {
    const c = new pg.Client({ connectionString: url(database) });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  };
  // Ready when it answers a query (initdb's cluster starts in about a second).
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`postgres exited: ${log}`);
    try {
      await admin((c) => c.query("SELECT 1"));
      break;
    } catch (err) {
      if (Date.now() > deadline) {
        kill();
        throw new Error(`postgres did not answer within 60 s: ${(err as Error).message}\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const checkName = (name: string) => {
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`bad database name ${name}`);
    return name;
  };
  return {
    url,
    pid,
    async createDatabase(name) {
      await admin((c) => c.query(`CREATE DATABASE ${checkName(name)}`));
      return url(name);
    },
    async dropDatabase(name) {
      await admin((c) => c.query(`DROP DATABASE IF EXISTS ${checkName(name)} WITH (FORCE)`));
    },
    async createSchema(database, name) {
      await admin((c) => c.query(`CREATE SCHEMA ${checkName(name)}`), checkName(database));
      return `${url(database)}?options=${encodeURIComponent(`-c search_path=${name}`)}`;
    },
    async dropSchema(database, name) {
      await admin((c) => c.query(`DROP SCHEMA IF EXISTS ${checkName(name)} CASCADE`), checkName(database));
    },
    async stop() {
      process.removeListener("exit", kill);
      if (child.exitCode === null) {
        // SIGINT: a fast shutdown (disconnects clients, then exits).
        kill();
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

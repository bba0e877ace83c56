// A real, throwaway PostgreSQL server, for tests (packages/server/test/postgres-server.ts) and
// benches (bench/fleet-sim.mjs): Debian's postgresql-15 binaries (installed by
// scripts/setup-packages.sh), a fresh cluster in a temporary directory (initdb), listening on a
// free loopback port, its socket in that directory. PostgreSQL refuses to run as root, so as
// root the cluster belongs to, and the server runs as, the `postgres` user the package created.
// It never touches the system's own cluster. Stop it with stop() (by PID; the directory goes too).
// Types: postgres.d.mts.
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";

/** The newest PostgreSQL under Debian's /usr/lib/postgresql/VERSION/bin that has initdb. */
function binDir() {
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

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === "object" && addr ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

/**
 * Starts a cluster. `durable: true` keeps PostgreSQL's defaults (fsync, synchronous commits and
 * full-page writes on), so a bench measures what a production database would do; `durable: false`
 * turns them off (and initdb's sync), which makes CREATE DATABASE and commits cheap for tests.
 */
export async function startPostgres({ durable }) {
  const bin = binDir();
  const dir = mkdtempSync(path.join(tmpdir(), "sandtree-pg-"));
  const data = path.join(dir, "data");
  // As root: become `postgres` (setpriv execs, so the PID we hold is the server's own).
  let prefix = [];
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    chownSync(dir, uid, gid);
    chmodSync(dir, 0o700);
    prefix = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"];
  }
  const cmd = (argv) => {
    const full = [...prefix, ...argv];
    return [full[0], full.slice(1)];
  };
  const initdb = [path.join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"];
  execFileSync(...cmd(durable ? initdb : [...initdb, "--no-sync"]), { stdio: "pipe" });
  const port = await freePort();
  const settings = ["listen_addresses=127.0.0.1", "max_connections=200"];
  if (!durable) settings.push("fsync=off", "synchronous_commit=off", "full_page_writes=off");
  const [file, args] = cmd([
    path.join(bin, "postgres"),
    "-D",
    data,
    "-k",
    dir,
    "-p",
    String(port),
    ...settings.flatMap((s) => ["-c", s]),
  ]);
  const child = spawn(file, args, { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr.on("data", (d) => {
    log = (log + d.toString()).slice(-4000);
  });
  const exited = new Promise((resolve) => child.once("exit", () => resolve()));
  const pid = child.pid;
  if (pid === undefined) throw new Error("postgres did not start");
  const kill = () => {
    try {
      process.kill(pid, "SIGINT");
    } catch {}
  };
  process.once("exit", kill);

  const url = (db) => `postgres://postgres@127.0.0.1:${port}/${db}`;
  const admin = async (fn, database = "postgres") => {
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
        throw new Error(`postgres did not answer within 60 s: ${err.message}\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const checkName = (name) => {
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

// A throwaway PostgreSQL cluster for benches: Debian's postgresql-15 binaries (scripts/setup-packages.sh
// installs them), initdb in a temporary directory, a free loopback port; as root the cluster runs as
// the `postgres` user. Durability stays at PostgreSQL's defaults (fsync and synchronous_commit on),
// so a bench measures what a production database would do. stop() ends it by PID.
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";

function binDir() {
  const root = "/usr/lib/postgresql";
  const v = existsSync(root)
    ? readdirSync(root)
        .filter((d) => /^\d+$/.test(d) && existsSync(path.join(root, d, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))[0]
    : undefined;
  if (!v) throw new Error("PostgreSQL is not installed (scripts/setup-packages.sh installs postgresql-15)");
  return path.join(root, v, "bin");
}

function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Starts a cluster; answers `{ url, stop() }` with `url` naming its `postgres` database. */
export async function startPostgres() {
  const bin = binDir();
  const dir = mkdtempSync(path.join(tmpdir(), "sandtree-bench-pg-"));
  const data = path.join(dir, "data");
  let prefix = [];
  if (process.getuid?.() === 0) {
    chownSync(
      dir,
      Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" })),
      Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" })),
    );
    chmodSync(dir, 0o700);
    prefix = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"];
  }
  const argv = (a) => [...prefix, ...a];
  const [i0, ...iargs] = argv([
    path.join(bin, "initdb"),
    "-D",
    data,
    "-U",
    "postgres",
    "-A",
    "trust",
    "-E",
    "UTF8",
    "--locale=C",
  ]);
  execFileSync(i0, iargs, { stdio: "pipe" });
  const port = await freePort();
  const [p0, ...pargs] = argv([
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
    "max_connections=200",
  ]);
  const child = spawn(p0, pargs, { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr.on("data", (d) => {
    log = (log + d).slice(-4000);
  });
  const exited = new Promise((r) => child.once("exit", r));
  const kill = () => {
    try {
      process.kill(child.pid, "SIGINT");
    } catch {}
  };
  process.once("exit", kill);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`postgres exited: ${log}`);
    const c = new pg.Client({ connectionString: url });
    try {
      await c.connect();
      await c.end();
      break;
    } catch (err) {
      if (Date.now() > deadline) {
        kill();
        throw new Error(`postgres did not answer within 60 s: ${err.message}\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    url,
    async stop() {
      process.removeListener("exit", kill);
      if (child.exitCode === null) {
        kill();
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

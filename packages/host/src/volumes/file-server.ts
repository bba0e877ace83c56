import { type ChildProcess, spawn } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  statSync,
  writeFileSync,
} from "node:fs";
import net from "node:net";
import path from "node:path";
import { SandtreeError } from "@sandtree/protocol";
import { type ExportEntry, ganeshaConfig } from "./ganesha-config.js";
import { type GuestMount, nfsOptions, VOLUME_SERVER_ADDRESS, type VolumeMount } from "./guest-mount.js";
import { RpcbindStub } from "./rpcbind-stub.js";

const GANESHA = "ganesha.nfsd";
const FSAL_VFS = ["/usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so", "/usr/lib/ganesha/libfsalvfs.so"];

export interface VolumeFileServerOptions {
  /** The server's own directory: config, log, pid file, ports and export ids, the rpcbind stub. */
  dir: string;
  /** How long a (re)start may take before it counts as failed. */
  startTimeoutMs?: number;
  log?: { warn(o: object, m: string): void; info?(o: object, m: string): void };
}

/** A mount as the file server exports it: the volume's directory on this host, resolved by its host (volumeDataDir). */
export interface ExportMount extends VolumeMount {
  dir: string;
}

/** Why this host cannot serve volumes to guests, or null when it can. */
export function volumeServerUnavailableReason(): string | null {
  if (process.getuid && process.getuid() !== 0) return "the server is not running as root";
  const onPath = (process.env.PATH ?? "/usr/bin:/usr/sbin").split(":").some((d) => existsSync(path.join(d, GANESHA)));
  if (!onPath) return `${GANESHA} is missing (install nfs-ganesha and nfs-ganesha-vfs; scripts/setup.sh does)`;
  if (!FSAL_VFS.some((f) => existsSync(f))) return "NFS-Ganesha's VFS backend is missing (install nfs-ganesha-vfs)";
  return null;
}

/** A free TCP port on this host now (the kernel's choice). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The host's file server for volumes: one NFS-Ganesha (NFSv3, userspace; the host kernel has no
 * nfsd) per sandtree server, a child process it owns: started on the first grant, restarted if
 * it dies, stopped by PID at close(). One export per host directory, open only to the guest
 * addresses granted it; a grant or revoke rewrites the config and makes the server reread its
 * exports (SIGHUP). Ports are chosen once and kept in the directory, with the export ids (NFS
 * file handles carry them), so a restarted server serves the same handles on the same ports.
 */
export class VolumeFileServer {
  readonly ports: { nfs: number; mount: number };
  private readonly ids: Record<string, number>;
  /** machine name -> its guest address and mounts. */
  private readonly grants = new Map<string, { address: string; mounts: ExportMount[] }>();
  private child: ChildProcess | null = null;
  private stub: RpcbindStub | null = null;
  private starting: Promise<void> | null = null;
  private closed = false;
  private restarts = 0;
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly opts: VolumeFileServerOptions,
    ports: { nfs: number; mount: number },
    ids: Record<string, number>,
  ) {
    this.ports = ports;
    this.ids = ids;
  }

  /** Picks (or finds again) the ports; starts nothing. */
  static async open(opts: VolumeFileServerOptions): Promise<VolumeFileServer> {
    mkdirSync(path.join(opts.dir, "run"), { recursive: true, mode: 0o700 });
    const portsFile = path.join(opts.dir, "ports.json");
    let ports: { nfs: number; mount: number } | null = null;
    try {
      ports = JSON.parse(readFileSync(portsFile, "utf8")) as { nfs: number; mount: number };
    } catch {}
    if (!ports) {
      ports = { nfs: await freePort(), mount: await freePort() };
      writeFileSync(portsFile, JSON.stringify(ports));
    }
    let ids: Record<string, number> = {};
    try {
      ids = JSON.parse(readFileSync(path.join(opts.dir, "exports.json"), "utf8")) as Record<string, number>;
    } catch {}
    return new VolumeFileServer(opts, ports, ids);
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  private get configFile(): string {
    return path.join(this.opts.dir, "ganesha.conf");
  }
  private get logFile(): string {
    return path.join(this.opts.dir, "ganesha.log");
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => {});
    return next;
  }

  /**
   * Exports each mount's directory to `guestAddress` (replacing the machine's earlier grant) and
   * returns what the guest mounts. The server is running and has reread its exports on return.
   */
  grant(machine: string, guestAddress: string, mounts: ExportMount[]): Promise<GuestMount[]> {
    return this.serial(async () => {
      if (this.closed) throw new SandtreeError("INTERNAL", "the volume file server is closed");
      const resolved = mounts.map((m) => {
        let dir: string;
        try {
          dir = realpathSync(m.dir);
          if (!statSync(dir).isDirectory()) throw new Error("not a directory");
        } catch (err) {
          throw new SandtreeError(
            "INTERNAL",
            `volume ${m.volume} has no directory on this host (${m.dir})`,
            { volume: m.volume },
            { cause: err },
          );
        }
        if (!m.guestPath.startsWith("/")) throw new SandtreeError("INVALID_PATH", `mount path ${m.guestPath} is not absolute`);
        return { ...m, dir };
      });
      this.grants.set(machine, { address: guestAddress, mounts: resolved });
      await this.apply();
      return resolved.map((m) => ({
        source: `${VOLUME_SERVER_ADDRESS}:${this.pseudo(m.dir)}`,
        target: m.guestPath,
        type: "nfs" as const,
        options: nfsOptions(this.ports),
        readOnly: m.readOnly ?? false,
      }));
    });
  }

  /** Closes the machine's exports to its address (idempotent). */
  revoke(machine: string): Promise<void> {
    return this.serial(async () => {
      if (!this.grants.delete(machine) || this.closed || !this.child) return;
      await this.apply();
    });
  }

  private pseudo(hostDir: string): string {
    return `/v${this.idOf(hostDir)}`;
  }

  private idOf(hostDir: string): number {
    let id = this.ids[hostDir];
    if (id === undefined) {
      const used = new Set(Object.values(this.ids));
      id = 1;
      while (used.has(id)) id++;
      if (id > 65535) throw new SandtreeError("INTERNAL", "too many volume exports");
      this.ids[hostDir] = id;
      const file = path.join(this.opts.dir, "exports.json");
      writeFileSync(`${file}.tmp`, JSON.stringify(this.ids));
      renameSync(`${file}.tmp`, file);
    }
    return id;
  }

  private exports(): ExportEntry[] {
    const byDir = new Map<string, ExportEntry>();
    for (const { address, mounts } of this.grants.values()) {
      for (const m of mounts) {
        let e = byDir.get(m.dir);
        if (!e) {
          e = { id: this.idOf(m.dir), hostDir: m.dir, pseudo: this.pseudo(m.dir), readWrite: [], readOnly: [] };
          byDir.set(m.dir, e);
        }
        const list = m.readOnly ? e.readOnly : e.readWrite;
        if (!list.includes(address)) list.push(address);
      }
    }
    // An address both read-only and read-write on one export gets read-write.
    for (const e of byDir.values()) e.readOnly = e.readOnly.filter((a) => !e.readWrite.includes(a));
    return [...byDir.values()].sort((a, b) => a.id - b.id);
  }

  /** Writes the config; starts the server, or makes it reread its exports and waits for that. */
  private async apply(): Promise<void> {
    const text = ganeshaConfig({ nfsPort: this.ports.nfs, mountPort: this.ports.mount, exports: this.exports() });
    writeFileSync(`${this.configFile}.tmp`, text);
    renameSync(`${this.configFile}.tmp`, this.configFile);
    if (!this.child) {
      await this.start();
      return;
    }
    const before = this.rereads();
    this.child.kill("SIGHUP");
    const deadline = Date.now() + (this.opts.startTimeoutMs ?? 30_000);
    while (this.rereads() === before) {
      if (Date.now() > deadline) throw new SandtreeError("INTERNAL", "the volume file server did not reread its exports");
      if (!this.child) {
        await this.start();
        return;
      }
      await sleep(50);
    }
  }

  private rereads(): number {
    try {
      return readFileSync(this.logFile, "utf8").split("Reread exports complete").length - 1;
    } catch {
      return 0;
    }
  }

  private start(): Promise<void> {
    this.starting ??= this.spawnServer().finally(() => {
      this.starting = null;
    });
    return this.starting;
  }

  /**
   * A server left by a previous sandtree process that died without closing it (kill -9) still
   * holds the ports and serves its old exports: it is stopped first (checked by its command line,
   * since pids are reused), so the new one binds and serves the grants of this process.
   */
  private async stopLeftover(pidFile: string): Promise<void> {
    let pid: number;
    try {
      pid = Number.parseInt(readFileSync(pidFile, "utf8"), 10);
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (!cmd.includes("ganesha.nfsd") || !cmd.includes(this.configFile)) return;
      process.kill(pid, "SIGKILL");
    } catch {
      return;
    }
    for (let i = 0; i < 100 && existsSync(`/proc/${pid}`); i++) await sleep(50);
  }

  private async spawnServer(): Promise<void> {
    const runDir = path.join(this.opts.dir, "run");
    await this.stopLeftover(path.join(runDir, "ganesha.pid"));
    this.stub ??= await RpcbindStub.listen(path.join(runDir, "rpcbind.sock"));
    // A mount namespace of its own where the stub's directory is /run (rpcbind's socket path),
    // a slave of the server's: volumes' images mounted later (a shared root) reach it too.
    const script = 'mount --bind "$1" /run && exec ganesha.nfsd -F -L "$2" -f "$3" -p "$4" -N NIV_EVENT';
    const logFd = openSync(path.join(this.opts.dir, "ganesha.stderr"), "a");
    let child: ChildProcess;
    try {
      child = spawn(
        "unshare",
        [
          "--mount",
          "--propagation",
          "slave",
          "--",
          "sh",
          "-c",
          script,
          "sh",
          runDir,
          this.logFile,
          this.configFile,
          path.join(runDir, "ganesha.pid"),
        ],
        { stdio: ["ignore", logFd, logFd], detached: true },
      );
    } finally {
      closeSync(logFd);
    }
    child.on("error", () => {});
    this.child = child;
    child.once("exit", (code, signal) => {
      if (this.child === child) this.child = null;
      if (this.closed) return;
      this.opts.log?.warn({ code, signal, restarts: this.restarts }, "volume file server exited; restarting it");
      this.restarts++;
      // Guests' hard mounts wait; a server that dies at once again is retried less often.
      setTimeout(
        () => void this.serial(() => (this.closed || this.child ? Promise.resolve() : this.start())).catch(() => {}),
        Math.min(5000, 200 * this.restarts),
      );
    });
    const deadline = Date.now() + (this.opts.startTimeoutMs ?? 30_000);
    for (;;) {
      if (this.child !== child)
        throw new SandtreeError("INTERNAL", `the volume file server exited at start; see ${this.logFile}`);
      if ((await portAnswers(this.ports.nfs)) && (await portAnswers(this.ports.mount))) return;
      if (Date.now() > deadline) {
        child.kill("SIGKILL");
        throw new SandtreeError("INTERNAL", `the volume file server did not start; see ${this.logFile}`);
      }
      await sleep(100);
    }
  }

  /** Stops the server (SIGTERM, then SIGKILL) and the stub. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
    const child = this.child;
    this.child = null;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((r) => child.once("exit", () => r()));
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(t);
    }
    await this.stub?.close();
    this.stub = null;
  }
}

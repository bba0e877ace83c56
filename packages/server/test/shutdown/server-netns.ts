// A network namespace a test makes for a server child (sandbox networking on), and what such a
// server can leave in it: its nftables table `sandtree_<tag>`, taps named `st<tag>-...`, processes.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { withHostCgroups } from "../../../../scripts/lib/host-cgroups.mjs";

export class ServerNetns {
  readonly name: string;
  /** The child started in it (killed by destroy() if still running). */
  child: ChildProcess | null = null;
  /** The data directory startServerScript made (removed by destroy()). */
  dataDir: string | null = null;

  constructor(prefix: string) {
    this.name = `${prefix}-${process.pid.toString(36)}`;
  }

  /** Makes the namespace, loopback up. */
  create(): void {
    execFileSync("ip", ["netns", "add", this.name]);
    execFileSync("ip", ["-n", this.name, "link", "set", "lo", "up"]);
  }

  /** Runs `node script ...args` in it (`ip netns exec` execs: the child's PID is node's). */
  spawnNode(script: string, args: string[]): ChildProcess {
    // A server there gives each VM its cgroup: the namespace's fresh /sys gets the host's hierarchies.
    const [cmd, argv] = withHostCgroups(process.execPath, [script, ...args]);
    this.child = spawn("ip", ["netns", "exec", this.name, cmd, ...argv], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    return this.child;
  }

  /**
   * Makes the namespace and a data directory (named from `prefix`, removed by destroy()), then runs
   * `node script DIR` in it with its output gathered as it comes (`out.stdout`, `out.stderr`).
   */
  startServerScript(
    script: string,
    prefix: string,
  ): { proc: ChildProcess; out: { stdout: string; stderr: string }; dataDir: string } {
    this.create();
    this.dataDir = mkdtempSync(path.join(tmpdir(), prefix));
    const proc = this.spawnNode(script, [this.dataDir]);
    const out = { stdout: "", stderr: "" };
    proc.stdout?.setEncoding("utf8").on("data", (d: string) => (out.stdout += d));
    proc.stderr?.setEncoding("utf8").on("data", (d: string) => (out.stderr += d));
    return { proc, out, dataDir: this.dataDir };
  }

  exec(cmd: string, ...argv: string[]): string {
    return execFileSync("ip", ["netns", "exec", this.name, cmd, ...argv]).toString();
  }

  pids(): number[] {
    return execFileSync("ip", ["netns", "pids", this.name]).toString().split("\n").filter(Boolean).map(Number);
  }

  /** The nftables table listing and the server taps left in it (both empty once a server is gone cleanly). */
  leftovers(): { tables: string; taps: string[] } {
    const taps = this.exec("ip", "-o", "link")
      .split("\n")
      .filter((l) => /: st[0-9a-z]+-/.test(l));
    return { tables: this.exec("nft", "list", "tables"), taps };
  }

  /** Whatever a failure left: the child and every process in it (by PID), the namespace, the data directory. */
  destroy(): void {
    if (this.child?.exitCode === null && this.child.pid) process.kill(this.child.pid, "SIGKILL");
    try {
      for (const pid of this.pids()) process.kill(pid, "SIGKILL");
    } catch {}
    try {
      execFileSync("ip", ["netns", "del", this.name], { stdio: "pipe" });
    } catch {}
    if (this.dataDir) rmSync(this.dataDir, { recursive: true, force: true });
  }
}

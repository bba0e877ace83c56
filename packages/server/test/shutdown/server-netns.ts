// A network namespace a test makes for a server child (sandbox networking on), and what such a
// server can leave in it: its nftables table `sandtree_<tag>`, taps named `st<tag>-...`, processes.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { withHostCgroups } from "../host-cgroups.js";

export class ServerNetns {
  readonly name: string;
  /** The child started in it (killed by destroy() if still running). */
  child: ChildProcess | null = null;

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

  /** Whatever a failure left: the child and every process in it (by PID), then the namespace. */
  destroy(): void {
    if (this.child?.exitCode === null && this.child.pid) process.kill(this.child.pid, "SIGKILL");
    try {
      for (const pid of this.pids()) process.kill(pid, "SIGKILL");
    } catch {}
    try {
      execFileSync("ip", ["netns", "del", this.name], { stdio: "pipe" });
    } catch {}
  }
}

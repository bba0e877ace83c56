import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { jailCommand, jailRootOf, type QemuVmSpec } from "@sandtree/host/qemu";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { qemuPidsFor, startTestServer, type TestServer } from "./helpers.js";

// Every QEMU runs jailed (docs/security.md): these read the jail off two running sandboxes' QEMUs,
// then probe from inside sandbox A's jail (its uid, the jail's mount namespace and /proc, no
// capability, no_new_privs: the same launcher QEMU starts through) what it must not reach.

let t: TestServer;
const vms: Array<{ id: string; pid: number; uid: number; argv: string[] }> = [];

const status = (pid: number) => readFileSync(`/proc/${pid}/status`, "utf8");
const field = (pid: number, name: string) => new RegExp(`^${name}:\\s+(\\S+)`, "m").exec(status(pid))?.[1];
const arg = (argv: string[], re: RegExp) => argv.map((a) => re.exec(a)?.[1]).find((x) => x !== undefined) ?? "";
const diskOf = (vm: (typeof vms)[0]) => arg(vm.argv, /file\.filename=([^,]+live-[^,]+\.qcow2)/);
const qmpOf = (vm: (typeof vms)[0]) => arg(vm.argv, /^unix:([^,]+qmp\.sock)/);

beforeAll(async () => {
  t = await startTestServer();
  const ids: string[] = [];
  for (let i = 0; i < 2; i++) {
    const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    expect(r.status).toBe(201);
    ids.push(r.body.id);
  }
  for (const id of ids) {
    await t.waitRunning(id);
    const line = qemuPidsFor([id])[0] ?? "";
    const pid = Number(line.split(" ")[0]);
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    vms.push({ id, pid, uid: Number(field(pid, "Uid")), argv });
  }
}, 600_000);
afterAll(async () => {
  await t?.close();
});

/** Runs `argv` in sandbox A's jail (its uid, and a root built for A's files as its QEMU's was); its exit status and what it wrote. */
function inJailOfA(argv: string[]): { status: number | null; out: string } {
  const a = vms[0]!;
  const spec = { accel: "tcg", rootDisk: diskOf(a), consoleLog: arg(a.argv, /^file,id=console,path=(.+)$/) } as QemuVmSpec;
  const [file, args] = jailCommand(a.uid, argv, { root: jailRootOf({ spec, runDir: path.dirname(qmpOf(a)) }) });
  const r = spawnSync(file, args, { encoding: "utf8", timeout: 30_000, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe("the QEMU jail", () => {
  it("runs each QEMU as its own unprivileged uid, under seccomp, with no capability and no_new_privs", () => {
    expect(vms).toHaveLength(2);
    for (const vm of vms) {
      const uids = field(vm.pid, "Uid");
      expect(status(vm.pid)).toMatch(/^Uid:\s+(\d+)\s+\1\s+\1\s+\1$/m);
      expect(Number(uids)).toBeGreaterThan(0);
      expect(status(vm.pid)).toMatch(/^Gid:\s+(\d+)\s+\1\s+\1\s+\1$/m);
      expect(Number(field(vm.pid, "Gid"))).toBeGreaterThan(0);
      expect(status(vm.pid)).toMatch(/^Groups:[ \t]*$/m);
      expect(field(vm.pid, "Seccomp")).toBe("2");
      for (const cap of ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]) expect(field(vm.pid, cap)).toBe("0000000000000000");
      expect(field(vm.pid, "NoNewPrivs")).toBe("1");
      // Its mount namespace is not the host's.
      const own = spawnSync("readlink", [`/proc/${vm.pid}/ns/mnt`], { encoding: "utf8" }).stdout;
      expect(own).not.toBe(spawnSync("readlink", ["/proc/self/ns/mnt"], { encoding: "utf8" }).stdout);
    }
    expect(vms[0]!.uid).not.toBe(vms[1]!.uid);
  });

  it("lets a process in A's jail read A's disk but nothing of B, the server or the host's processes", () => {
    const [a, b] = vms as [(typeof vms)[0], (typeof vms)[0]];
    expect(diskOf(a)).toMatch(/\.qcow2$/);
    // The probe works: A's own disk is a qcow2 it reads.
    const own = inJailOfA(["/bin/sh", "-c", 'head -c 3 "$1"', "probe", diskOf(a)]);
    expect(own).toEqual({ status: 0, out: "QFI" });
    const denied = (argv: string[]) => {
      const r = inJailOfA(argv);
      expect(r.status, `${argv.join(" ")}: ${r.out}`).not.toBe(0);
      expect(r.out).toMatch(/Permission denied|No such file|EACCES|ENOENT/);
    };
    const bRun = path.dirname(qmpOf(b));
    for (const f of [
      diskOf(b),
      path.join(t.dataDir, "sandtree.db"),
      path.join(t.dataDir, "server.key"),
      path.join(t.dataDir, "join-token"),
      path.join(t.dataDir, "machine-logs", `sandtree-${b.id}`, "console.log"),
      path.join(bRun, "qemu.pid"),
      `/proc/${b.pid}/cmdline`,
      `/proc/${b.pid}/status`,
      "/proc/1/cmdline",
    ]) {
      denied(["/bin/cat", f]);
    }
    denied(["/bin/ls", bRun]);
    // B's QMP and agent sockets: no connection.
    for (const sock of [qmpOf(b), path.join(bRun, "agent.sock")]) {
      const r = inJailOfA([
        process.execPath,
        "-e",
        "require('net').connect(process.argv[1]).on('connect',()=>{console.log('CONNECTED');process.exit(0)}).on('error',(e)=>{console.log(e.code);process.exit(1)})",
        sock,
      ]);
      expect(r.out.trim()).toMatch(/^(EACCES|ENOENT)$/);
    }
    // Its /proc lists its uid's processes alone (the probe, A's QEMU), none of the host's.
    const procs = inJailOfA(["/bin/sh", "-c", 'for p in /proc/[0-9]*; do basename "$p"; done'])
      .out.trim()
      .split("\n")
      .map(Number);
    expect(procs).toContain(a.pid);
    for (const other of [b.pid, process.pid, 1]) expect(procs).not.toContain(other);
    expect(procs.length).toBeLessThanOrEqual(4);
  });

  it("gives A's QEMU a root of its own: the data directory, other sandboxes, /etc and /root are not there", () => {
    const [a, b] = vms as [(typeof vms)[0], (typeof vms)[0]];
    // Its own files are there (the probe reads its console log and lists its run directory).
    const consoleLog = arg(a.argv, /^file,id=console,path=(.+)$/);
    expect(
      inJailOfA([
        "/bin/sh",
        "-c",
        'test -f "$1" && test -d "$2" && echo OK',
        "probe",
        consoleLog,
        path.dirname(qmpOf(a)),
      ]).out.trim(),
    ).toBe("OK");
    // What it must not see is absent, not merely closed: the shell's test says so as root would.
    for (const p of [
      path.join(t.dataDir, "sandtree.db"),
      path.join(t.dataDir, "server.key"),
      path.join(t.dataDir, "sandboxes", b.id),
      path.dirname(qmpOf(b)),
      "/root/.bashrc",
      "/etc/shadow",
      "/etc/passwd",
      "/home",
      "/var",
      "/sys/kernel",
    ]) {
      const r = inJailOfA(["/bin/sh", "-c", 'ls -d -- "$1" 2>&1; exit 0', "probe", p]);
      expect(r.out, p).toMatch(/No such file or directory/);
    }
    // A's QEMU itself sees the same root: its /proc/PID/root lists the jail's entries alone.
    const top = spawnSync("ls", ["-A", `/proc/${a.pid}/root/`], { encoding: "utf8" })
      .stdout.split("\n")
      .filter(Boolean);
    expect(top).not.toContain("etc/shadow");
    expect(top).not.toContain("home");
    expect(top).toContain("usr");
  });
});

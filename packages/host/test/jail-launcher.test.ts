import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { defaultJailConfig, jailCommand, jailerPath } from "../src/qemu.js";

// sandtree-jail (packages/host/jail) against the unshare/sh/setpriv chain it replaced: the same
// root, the same process state, and its own steps (the tap's owner, its errors). Needs root and
// the built jailer (setup); no VM.

const dir = mkdtempSync(path.join(tmpdir(), "sandtree-jail-launcher-"));
chmodSync(dir, 0o711);
const rw = path.join(dir, "rw");
const ro = path.join(dir, "ro.txt");
writeFileSync(ro, "read-only\n");
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const uid = 1_100_000 + 4001;
const jailer = defaultJailConfig().enabled ? jailerPath() : null;

const PROBE = [
  "id -u; id -G",
  "for f in / /bin /lib /usr /dev /dev/* /dev/net/tun /proc /etc/ld.so.cache $1 $2; do stat -c '%n %F %a %u %g %t:%T' $f; done",
  "grep -E '^(Cap|NoNewPrivs|Seccomp:)' /proc/self/status",
  "ls -A /proc | grep -v '^[0-9]'",
  "cat $2; echo x > $1/w && cat $1/w; rm $1/w",
  "echo y > $2 || echo ro-refused",
  "ls /.old 2>&1 || echo no-old",
].join("; ");

const probe = (via: "jailer" | "shell") => {
  rmSync(rw, { recursive: true, force: true });
  spawnSync("mkdir", ["-m", "0700", rw]);
  spawnSync("chown", [`${uid}:${uid}`, rw]);
  const [file, args] = jailCommand(uid, ["/bin/sh", "-c", PROBE, "probe", rw, ro], {
    tun: true,
    root: { rw: [rw], ro: [ro] },
    via,
  });
  return spawnSync(file, args, { encoding: "utf8" });
};

describe.skipIf(!jailer)("sandtree-jail", () => {
  it("gives the program the same root and process state as the shell launcher", () => {
    const a = probe("jailer");
    const b = probe("shell");
    expect(a.status, a.stderr).toBe(0);
    expect(b.status, b.stderr).toBe(0);
    expect(a.stdout).toContain("CapBnd:\t0000000000000000");
    expect(a.stdout).toContain("NoNewPrivs:\t1");
    expect(a.stdout).toContain("ro-refused");
    expect(a.stdout).toContain("/dev/net/tun character special file 666 0 0 a:c8");
    expect(a.stdout).toBe(b.stdout);
  });

  it("makes a host tap the uid's own before entering its namespace", () => {
    const tap = `stjl${process.pid % 100000}`;
    expect(spawnSync("ip", ["tuntap", "add", "dev", tap, "mode", "tap"]).status).toBe(0);
    try {
      const [file, args] = jailCommand(uid, ["true"], { tap, tun: true });
      const r = spawnSync(file, args, { encoding: "utf8" });
      expect(r.status, r.stderr).toBe(0);
      const link = spawnSync("ip", ["-d", "link", "show", tap], { encoding: "utf8" }).stdout;
      expect(link).toMatch(new RegExp(`user ${uid} group ${uid}`));
    } finally {
      spawnSync("ip", ["link", "del", tap]);
    }
  });

  it("turns transparent huge pages off for the program with --no-thp, and only then", () => {
    const thp = (noHugePages: boolean) => {
      const [file, args] = jailCommand(uid, ["/bin/sh", "-c", "grep THP_enabled /proc/self/status"], { noHugePages });
      const r = spawnSync(file, args, { encoding: "utf8" });
      expect(r.status, r.stderr).toBe(0);
      return r.stdout.trim();
    };
    expect(thp(true)).toBe("THP_enabled:\t0");
    expect(thp(false)).toBe("THP_enabled:\t1");
  });

  it("names the failed step and its errno, and exits non-zero", () => {
    const r = spawnSync(jailer as string, ["--root", path.join(dir, "mnt"), "--uid", String(uid), "--", "true"], {
      encoding: "utf8",
    });
    expect(r.status).toBe(125);
    expect(r.stderr).toMatch(/^sandtree-jail: mount tmpfs .*: No such file or directory/);
    const bad = spawnSync(jailer as string, ["--uid", "0", "--", "true"], { encoding: "utf8" });
    expect(bad.status).toBe(125);
    expect(bad.stderr).toContain("usage:");
  });
});

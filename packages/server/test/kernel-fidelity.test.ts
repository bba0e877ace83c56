import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

// One sandtree/debian sandbox for every check: the whole kernel (modules disk), cgroup v2 and
// the usual kernel filesystems, without anything added to the image.
let t: TestServer;
let id: string;
beforeAll(async () => {
  t = await startTestServer();
  const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/debian", memory_gb: 0.5, disk_size_gb: 2 });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  id = r.body.id as string;
  await t.waitRunning(id);
});
afterAll(async () => {
  await t?.close();
});

const run = async (command: string) => {
  const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { stdout: string; stderr: string; exit_code: number };
};
const ok = async (command: string) => {
  const r = await run(command);
  expect(r.exit_code, `${command}\n${r.stdout}${r.stderr}`).toBe(0);
  return r.stdout;
};

/** A guest command printing the count in `file` once it is past `floor` (or after 10 s: the caller's expect says which). */
const countPast = (file: string, floor: number) =>
  `for i in $(seq 100); do [ "$(cat ${file} 2>/dev/null || echo 0)" -gt ${floor} ] && break; sleep 0.1; done; cat ${file}`;

describe("kernel fidelity", () => {
  it("has every module at /lib/modules/$(uname -r), and the kernel's loader finds them", async () => {
    expect(
      await ok("test -s /lib/modules/$(uname -r)/modules.dep && find /lib/modules/$(uname -r)/kernel -name '*.ko' | wc -l"),
    ).toMatch(/^[1-9]\d{2,}\n$/);
    const helper = (await ok("cat /proc/sys/kernel/modprobe")).trim();
    expect(await ok(`test -x ${helper} && echo yes`)).toBe("yes\n");
    // Autoloading: overlay is a module; mounting it makes the kernel call modprobe.
    await ok(
      "mkdir -p /tmp/o/l /tmp/o/u /tmp/o/w /tmp/o/m && echo low > /tmp/o/l/f && mount -t overlay overlay -o lowerdir=/tmp/o/l,upperdir=/tmp/o/u,workdir=/tmp/o/w /tmp/o/m && echo up >> /tmp/o/m/f && cat /tmp/o/u/f && umount /tmp/o/m",
    );
    expect(await ok("grep -w overlay /proc/filesystems")).toContain("overlay");
    // Explicit loads through the helper, with dependencies (nf_tables needs nfnetlink).
    await ok(`${helper} nf_tables && ${helper} veth && ${helper} fuse`);
    expect(await ok("cut -d' ' -f1 /proc/modules | sort")).toMatch(/nf_tables[\s\S]*nfnetlink[\s\S]*veth/);
  });

  it("has kmod: `modprobe br_netfilter` loads it (with bridge), lsmod and /sys/module show it", async () => {
    expect(await ok("for c in modprobe lsmod modinfo; do command -v $c; done")).toMatch(/modprobe\n.*lsmod\n.*modinfo\n$/);
    // Not loaded before (nothing autoloads it); a module of the kernel, not built in.
    expect(await ok("test -e /sys/module/br_netfilter || echo absent")).toBe("absent\n");
    expect(await ok("modinfo -F filename br_netfilter")).toMatch(/br_netfilter\.ko/);
    await ok("modprobe br_netfilter");
    expect(await ok("lsmod")).toMatch(/^br_netfilter\s+\d+\s+0\s*$/m);
    expect(await ok("lsmod | grep -w ^bridge")).toMatch(/br_netfilter/);
    expect(await ok("cat /sys/module/br_netfilter/initstate")).toBe("live\n");
    expect(await ok("cat /proc/sys/net/bridge/bridge-nf-call-iptables")).toBe("1\n");
  });

  it("mounts cgroup v2 with its controllers delegated, and a memory limit OOM-kills a child", async () => {
    expect(await ok("stat -fc %T /sys/fs/cgroup")).toBe("cgroup2fs\n");
    expect(await ok("cat /sys/fs/cgroup/cgroup.subtree_control")).toMatch(/memory.*pids|pids.*memory/);
    await ok("mkdir -p /sys/fs/cgroup/oomt && echo 16M > /sys/fs/cgroup/oomt/memory.max");
    const r = await run(
      "sh -c 'echo $$ > /sys/fs/cgroup/oomt/cgroup.procs && exec python3 -c \"b = bytearray(96 << 20); print(len(b))\"'",
    );
    expect(r.exit_code).toBe(137);
    expect(await ok("grep oom_kill /sys/fs/cgroup/oomt/memory.events")).toMatch(/oom_kill [1-9]/);
  });

  it("looks like a normal host: devpts, shm, mqueue, tmpfs /run, user namespaces, no /dev/kvm", async () => {
    const mounts = await ok("cat /proc/mounts");
    for (const m of [/ \/dev\/pts devpts /, / \/dev\/shm tmpfs /, / \/dev\/mqueue mqueue /, / \/run tmpfs /]) {
      expect(mounts).toMatch(m);
    }
    expect(await ok("test -e /dev/kvm || echo absent")).toBe("absent\n");
    // Nodes of modules not loaded yet, as kmod's static-nodes makes them: opening one loads it.
    expect(await ok("stat -c '%F %t:%T %a' /dev/fuse /dev/net/tun")).toBe(
      "character special file a:e5 666\ncharacter special file a:c8 666\n",
    );
    expect(await ok("unshare --user --map-root-user id -u")).toBe("0\n");
  });

  it("stops its timer tick when idle: one-shot high-resolution timers, not the periodic tick", async () => {
    // Without ARAT in the guest CPU the kernel keeps a 250 Hz tick even when idle (3.5% of a host
    // core per idle sandbox under TCG). NOHZ_MODE_HIGHRES is 2 in /proc/timer_list.
    expect(await ok("grep -m1 -o -w arat /proc/cpuinfo")).toBe("arat\n");
    const timers = await ok("grep -E 'nohz_mode|event_handler' /proc/timer_list");
    expect(timers).toMatch(/\.nohz_mode\s*:\s*2/);
    expect(timers).toMatch(/event_handler:\s*hrtimer_interrupt/);
    expect(timers).not.toMatch(/tick_handle_periodic/);
    // kcompactd sleeps until asked (no 500 ms proactive-compaction check) and PSI has no 2 s
    // averaging work: the kernel arguments of an idle guest (IDLE_KERNEL_ARGS).
    expect(await ok("cat /proc/sys/vm/compaction_proactiveness")).toBe("0\n");
    expect(await ok("test -e /proc/pressure/cpu && echo psi || echo none")).toBe("none\n");
  });

  it("keeps a nohup background service running after the exec that started it returned", async () => {
    await ok(
      "nohup sh -c 'i=0; while true; do i=$((i+1)); echo $i > /tmp/alive.n; mv /tmp/alive.n /tmp/alive; sleep 0.2; done' >/dev/null 2>&1 &",
    );
    const a = await ok(countPast("/tmp/alive", 0));
    const b = await ok(countPast("/tmp/alive", Number(a)));
    expect(Number(b)).toBeGreaterThan(Number(a));
  });
});

describe("sandtree/busybox", () => {
  it("has every applet busybox has at its usual path, and a nohup that outlives its exec", async () => {
    const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", memory_gb: 0.25, disk_size_gb: 1 });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const bb = r.body.id as string;
    try {
      await t.waitRunning(bb);
      const sh = async (command: string) => {
        const x = await t.api("POST", `/v1/sandboxes/${bb}/exec`, { command });
        expect(x.body.exit_code, `${command}\n${x.body.stdout}${x.body.stderr}`).toBe(0);
        return x.body.stdout as string;
      };
      const applets = await sh("busybox --list-full | wc -l");
      expect(Number(applets)).toBeGreaterThan(200);
      expect(await sh("for p in $(busybox --list-full); do [ -x /$p ] || echo missing /$p; done")).toBe("");
      expect(await sh("/usr/bin/env echo via env")).toBe("via env\n");
      // Written to a temporary file and renamed: a read between `>`'s truncation and the write saw "".
      await sh(
        "nohup sh -c 'i=0; while true; do i=$((i+1)); echo $i > /tmp/beat.n; mv /tmp/beat.n /tmp/beat; sleep 0.2; done' >/dev/null 2>&1 &",
      );
      const a = await sh(countPast("/tmp/beat", 0));
      const b = await sh(countPast("/tmp/beat", Number(a)));
      expect(Number(b)).toBeGreaterThan(Number(a));
      // nohup ignores SIGHUP for the command it runs (bit 1 of SigIgn).
      expect(await sh("nohup grep SigIgn /proc/self/status")).toMatch(/SigIgn:\s+[0-9a-f]*[13579bdf]\n/);
    } finally {
      await t.api("DELETE", `/v1/sandboxes/${bb}`);
    }
  });
});

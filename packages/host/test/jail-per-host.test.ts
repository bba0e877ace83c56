// The jail and the resource limits are options of each host, not of the process: two QEMU hosts
// in one process, one jailed with limits and one with neither, each start a machine (sandtree/busybox,
// cold boots, side by side), and each QEMU shows its own host's settings.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createQemuHost,
  DEFAULT_MACHINE_RATES,
  defaultJailConfig,
  detectAccel,
  guestArtifacts,
  ImageStore,
  type Machine,
  type MachineHost,
  MachineLimiter,
} from "../src/index.js";

const root = typeof process.getuid === "function" && process.getuid() === 0;
const dir = mkdtempSync("/tmp/stjph-");
const machines: Machine[] = [];
let jailed: Machine;
let open: Machine;
let limiter: MachineLimiter;

/** Each host's own run and log roots. */
const dirsOf = (host: string) => ({
  runRoot: path.join(dir, "r", host),
  logRoot: path.join(dir, "logs", host),
  layersDir: dir,
  volumesDir: path.join(dir, "volumes", host),
});
const status = (pid: number) => readFileSync(`/proc/${pid}/status`, "utf8");
const field = (pid: number, name: string) => new RegExp(`^${name}:\\s+(\\S+)`, "m").exec(status(pid))?.[1];

describe.runIf(root)("two QEMU hosts in one process", () => {
  beforeAll(async () => {
    const accel = await detectAccel("auto");
    const { kernel, initramfs } = guestArtifacts();
    // The base by its name (its image's digest), each host resolving it in its store.
    const baseName = (await new ImageStore().resolve("sandtree/busybox")).digest;
    const jail = defaultJailConfig({ enabled: true });
    limiter = await MachineLimiter.open({ dataDir: dir, network: false });
    const hosts: Record<string, MachineHost> = {
      jailed: createQemuHost({ ...dirsOf("jailed"), accel, jail, limiter, diskCache: "direct" }),
      open: createQemuHost({ ...dirsOf("open"), accel, jail: { ...jail, enabled: false } }),
    };
    const started = await Promise.all(
      Object.entries(hosts).map(async ([name, host]) => {
        const base = await host.linkBase(baseName);
        const disk = `${name}.qcow2`;
        await host.createDisk(base, disk, 1024 ** 3);
        const m = await host.start({
          name: `stjph-${name}-${process.pid}`,
          accel,
          cpuCores: 1,
          memoryMb: 256,
          kernel,
          initramfs,
          rootDisk: disk,
          rates: DEFAULT_MACHINE_RATES,
        });
        machines.push(m);
        return m;
      }),
    );
    [jailed, open] = started as [Machine, Machine];
  }, 300_000);

  afterAll(async () => {
    for (const m of machines) await m.stop({ graceMs: 0 }).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });

  it("jail and limit only the host that asked for them", async () => {
    const pool = defaultJailConfig();
    const uid = Number(field(jailed.pid, "Uid"));
    expect(uid).toBeGreaterThanOrEqual(pool.uidBase);
    expect(uid).toBeLessThan(pool.uidBase + pool.uidCount);
    expect(field(jailed.pid, "Seccomp")).toBe("2");
    expect(field(jailed.pid, "NoNewPrivs")).toBe("1");
    expect(readFileSync(`/proc/${jailed.pid}/cgroup`, "utf8")).toContain(`/sandtree/stjph-jailed-${process.pid}`);

    // Its disk is opened as its host's option says (the limited host asked for O_DIRECT).
    const cmdline = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, "utf8");
    expect(cmdline(jailed.pid)).toContain("file.cache.direct=on");
    expect(cmdline(open.pid)).not.toContain("cache.direct");

    expect(field(open.pid, "Uid")).toBe("0");
    expect(field(open.pid, "Seccomp")).toBe("0");
    expect(readFileSync(`/proc/${open.pid}/cgroup`, "utf8")).not.toContain("/sandtree/");
    // Both guests answer.
    for (const m of [jailed, open]) {
      let code = -1;
      for await (const ev of m.exec({ shell: "true", timeoutMs: 60_000 }).events)
        if (ev.type === "exit") code = ev.info.exit_code;
      expect(code).toBe(0);
    }
  });
});

// The conformance suite against the in-memory fake host (no VM: milliseconds).
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { FakeHost } from "../../src/fake.js";
import { machineHostConformance } from "./machine-host-conformance.js";

machineHostConformance(
  "fake",
  async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "sandtree-fake-conf-"));
    const host = new FakeHost();
    const runRoot = path.join(dir, "run");
    mkdirSync(runRoot);
    const base = await host.linkBase(dir, path.join(dir, "img", "base.ext4"));
    return {
      host,
      dir,
      runRoot,
      base,
      adoptsLive: true,
      spec: (name, rootDisk) => ({
        name,
        accel: "tcg",
        cpuCores: 1,
        memoryMb: 256,
        kernel: "",
        initramfs: "",
        rootDisk,
        runDir: path.join(runRoot, name),
        logDir: path.join(dir, "logs", name),
      }),
      close: async () => rmSync(dir, { recursive: true, force: true }),
    };
  },
  5_000,
);

// The conformance suite against a remote host: RemoteHost -> the host service on loopback ->
// a worker's FakeHost (no VM: fast, runs in CI beside fake-host.test.ts).
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { FakeHost } from "../../src/fake.js";
import { connectRemoteHost, serveMachineHost } from "../../src/remote.js";
import { machineHostConformance } from "./machine-host-conformance.js";

machineHostConformance(
  "remote (worker serving the fake host)",
  async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "sandtree-remote-conf-"));
    const key = "stw_conformance-key";
    const worker = await serveMachineHost({ host: new FakeHost(), key: () => key });
    const host = await connectRemoteHost({ url: worker.url, key });
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
      close: async () => {
        host.close();
        await worker.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
  5_000,
);

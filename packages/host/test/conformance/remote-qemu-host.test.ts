// The conformance suite against a remote host whose worker runs this machine's QEMU microVMs:
// RemoteHost -> the host service on loopback -> createQemuHost (sandtree/debian; the same few
// short VMs as qemu-host.test.ts, two at a time).
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import path from "node:path";
import { createQemuHost, detectAccel, guestArtifacts, ImageStore } from "../../src/index.js";
import { connectRemoteHost, serveMachineHost } from "../../src/remote.js";
import { machineHostConformance } from "./machine-host-conformance.js";

function artifactsMissing(): string | null {
  try {
    guestArtifacts();
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

if (artifactsMissing() === null) {
  machineHostConformance(
    "remote (worker serving the QEMU host)",
    async () => {
      // Short: machines' sockets live under it.
      const dir = mkdtempSync("/tmp/strconf-");
      const runRoot = path.join(dir, "r");
      mkdirSync(runRoot);
      const accel = await detectAccel("auto");
      const key = "stw_conformance-key";
      const worker = await serveMachineHost({ host: createQemuHost({ accel }), key: () => key });
      const host = await connectRemoteHost({ url: worker.url, key });
      const { kernel, initramfs } = guestArtifacts();
      const basePath = (await new ImageStore().resolve("sandtree/debian")).basePath;
      return {
        host,
        dir,
        runRoot,
        base: await host.linkBase(dir, basePath),
        // The worker's QEMU host holds each guest agent's one connection (see qemu-host.test.ts).
        adoptsLive: false,
        spec: (name, rootDisk) => ({
          name,
          accel,
          cpuCores: 1,
          memoryMb: 256,
          kernel,
          initramfs,
          rootDisk,
          runDir: path.join(runRoot, name.replace(/^conf-/, "")),
          logDir: path.join(dir, "logs", name),
        }),
        close: async () => {
          // Whatever the suite left running on the worker is stopped there before it goes.
          await Promise.all(worker.served.all().map((m) => m.stop({ graceMs: 0 }).catch(() => {})));
          host.close();
          await worker.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    120_000,
  );
} else {
  // Never a skip (CI counts one as a failure): without the guest's kernel and initramfs the suite fails and says why.
  const { describe, it } = await import("vitest");
  describe("MachineHost conformance: remote (worker serving the QEMU host)", () =>
    it("needs the guest artifacts", () => {
      throw new Error("no guest kernel/initramfs in the cache: run `bash scripts/setup.sh` first");
    }));
}

// The conformance suite against this machine's QEMU microVMs (sandtree/debian; three short VMs,
// two at a time). Skipped where setup did not build the guest.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import path from "node:path";
import { createQemuHost, detectAccel, guestArtifacts, ImageStore } from "../../src/index.js";
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
    "qemu",
    async () => {
      // Short: machines' sockets live under it.
      const dir = mkdtempSync("/tmp/stconf-");
      const runRoot = path.join(dir, "r");
      mkdirSync(runRoot);
      const accel = await detectAccel("auto");
      const host = createQemuHost({ accel });
      const { kernel, initramfs } = guestArtifacts();
      const basePath = (await new ImageStore().resolve("sandtree/debian")).basePath;
      return {
        host,
        dir,
        runRoot,
        base: await host.linkBase(dir, basePath),
        // QEMU's guest agent takes one client: restart.test.ts covers adoption by a new process.
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
        close: async () => rmSync(dir, { recursive: true, force: true }),
      };
    },
    120_000,
  );
} else {
  // Never a skip (CI counts one as a failure): without the guest's kernel and initramfs the suite fails and says why.
  const { describe, it } = await import("vitest");
  describe("MachineHost conformance: qemu", () =>
    it("needs the guest artifacts", () => {
      throw new Error("no guest kernel/initramfs in the cache: run `bash scripts/setup.sh` first");
    }));
}

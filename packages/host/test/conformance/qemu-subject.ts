// The conformance suite's QEMU subject (sandtree/debian, short VMs), shared by the local and the
// remote QEMU host files: `wrap` puts a host in front of this machine's QEMU host (itself, or a
// remote host over a worker serving it). Without the guest's artifacts the suite fails, never skips.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import path from "node:path";
import { describe, it } from "vitest";
import type { Accel, MachineHost } from "../../src/index.js";
import { createQemuHost, detectAccel } from "../../src/index.js";
import { artifactsMissing, smallGuestSpec } from "../helpers/guest.js";
import { machineHostConformance } from "./machine-host-conformance.js";

export function qemuConformance(
  name: string,
  dirPrefix: string,
  wrap: (qemu: MachineHost, accel: Accel) => Promise<{ host: MachineHost; close: () => Promise<void> }>,
): void {
  if (artifactsMissing() !== null) {
    // Never a skip (CI counts one as a failure): without the guest's kernel and initramfs the suite fails and says why.
    describe(`MachineHost conformance: ${name}`, () =>
      it("needs the guest artifacts", () => {
        throw new Error("no guest kernel/initramfs in the cache: run `bash scripts/setup.sh` first");
      }));
    return;
  }
  machineHostConformance(
    name,
    async () => {
      // Short: machines' sockets live under it.
      const dir = mkdtempSync(`/tmp/${dirPrefix}-`);
      const runRoot = path.join(dir, "r");
      mkdirSync(runRoot);
      const accel = await detectAccel("auto");
      const { host, close } = await wrap(createQemuHost({ accel }), accel);
      return {
        host,
        dir,
        runRoot,
        // Built by setup into this machine's image store (the QEMU host's default one).
        image: "sandtree/debian",
        // QEMU's guest agent takes one client: restart.test.ts covers adoption by a new process.
        adoptsLive: false,
        spec: (vm, rootDisk) =>
          smallGuestSpec({
            name: vm,
            accel,
            rootDisk,
            runDir: path.join(runRoot, vm.replace(/^conf-/, "")),
            logDir: path.join(dir, "logs", vm),
          }),
        close: async () => {
          await close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    120_000,
  );
}

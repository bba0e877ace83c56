// The conformance suite's fake subject (no VM), shared by the in-process and the remote fake host
// files: `wrap` puts a host in front of a new FakeHost (itself, or a remote host over a worker
// serving it). `fakeSpec` is the spec every fake machine gets (remote-host.test.ts too).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { FakeHost } from "../../src/fake.js";
import type { BlobStore, MachineHost, MachineSpec } from "../../src/index.js";
import { layerBlobs } from "./layer-blobs.js";
import { machineHostConformance } from "./machine-host-conformance.js";

/** A machine of 1 vCPU and 256 MiB (its host keeps its run and log folders). */
export function fakeSpec(): (name: string, rootDisk: string) => MachineSpec {
  return (name, rootDisk) => ({
    name,
    accel: "tcg",
    cpuCores: 1,
    memoryMb: 256,
    kernel: "",
    initramfs: "",
    rootDisk,
  });
}

export function fakeConformance(
  name: string,
  dirPrefix: string,
  wrap: (fake: FakeHost, blobs: BlobStore) => Promise<{ host: MachineHost; close: () => Promise<void> }>,
): void {
  machineHostConformance(
    name,
    async () => {
      const dir = mkdtempSync(path.join(tmpdir(), `${dirPrefix}-`));
      const store = await layerBlobs(dir);
      const { host, close } = await wrap(new FakeHost({ dir: path.join(dir, "host"), layersDir: dir }), store.blobs);
      return {
        host,
        dir,
        blobs: store.blobs,
        runRoot: path.join(dir, "host", "run"),
        image: "sandtree/busybox",
        adoptsLive: true,
        echoServer: (port) => `busybox nc -ll -p ${port} -e cat`,
        // The fake needs no tap: its connections are in memory.
        nic: async () => ({ tap: "fake0", guestNet: "10.0.0.2/30 10.0.0.1" }),
        spec: fakeSpec(),
        close: async () => {
          await close();
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    5_000,
  );
}

// The conformance suite's QEMU subject (sandtree/debian, short VMs), shared by the local and the
// remote QEMU host files: `wrap` puts a host in front of this machine's QEMU host (itself, or a
// remote host over a worker serving it). Without the guest's artifacts the suite fails, never skips.
import { mkdtempSync, rmSync } from "node:fs";
import path from "node:path";
import { describe, it } from "vitest";
import type { Accel, BlobStore, MachineHost, MachineSpec, VolumeImages } from "../../src/index.js";
import { createQemuHost, detectAccel, NetworkManager, networkUnavailableReason } from "../../src/index.js";
import { artifactsMissing, smallGuestSpec } from "../helpers/guest.js";
import { layerBlobs } from "./layer-blobs.js";
import { machineHostConformance } from "./machine-host-conformance.js";

/** A QEMU host for its volumes only (no machine starts): its directories in `dir`. */
export function qemuHostIn(dir: string, volumeImages?: VolumeImages) {
  return createQemuHost({
    runRoot: path.join(dir, "r"),
    logRoot: path.join(dir, "logs"),
    layersDir: path.join(dir, "layers"),
    volumesDir: path.join(dir, "volumes"),
    ...(volumeImages ? { volumeImages } : {}),
  });
}

/**
 * Taps for machines that need a network (a sandbox's: its own tap and nftables chain, deny-all
 * egress; the host reaches the guest's address), or null where this host cannot make them (not root).
 */
async function testNics(): Promise<{
  nic: (name: string) => Promise<NonNullable<MachineSpec["nic"]>>;
  close: () => Promise<void>;
} | null> {
  if ((await networkUnavailableReason()) !== null) return null;
  const tag = `c${Math.random().toString(36).slice(2, 7)}`;
  const net = new NetworkManager({ tag, subnet: `10.248.${Math.floor(Math.random() * 250)}.0/24`, resolverPort: 53 });
  await net.init([]);
  let next = 0;
  return {
    nic: async (name) => {
      const index = next++;
      const slot = net.slot(index);
      const tap = net.tapName(index);
      await net.createTap(tap, slot);
      const policy = { mode: "deny_all" as const, allow: [], deny: [] };
      await net.addRules({ sandboxId: name, slot, tap, policy, tunnels: [], generation: 1, resolved: [] });
      return { tap, guestNet: `${slot.address}/${slot.prefix} ${slot.gateway}` };
    },
    close: async () => {
      for (let i = 0; i < next; i++) await net.deleteTap(net.tapName(i)).catch(() => {});
      await net.destroy();
    },
  };
}

/** sandtree/debian has python3 (no nc): one connection at a time, echoed until its end. */
const ECHO_PY = [
  "import socket, sys",
  "s = socket.socket()",
  "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)",
  "s.bind(('0.0.0.0', int(sys.argv[1])))",
  "s.listen(8)",
  "while True:",
  "    c, _ = s.accept()",
  "    for d in iter(lambda: c.recv(65536), b''):",
  "        c.sendall(d)",
  "    c.close()",
].join("\n");

export function qemuConformance(
  name: string,
  dirPrefix: string,
  wrap: (qemu: MachineHost, accel: Accel, blobs: BlobStore) => Promise<{ host: MachineHost; close: () => Promise<void> }>,
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
      const accel = await detectAccel("auto");
      const store = await layerBlobs(dir);
      const { host, close } = await wrap(
        createQemuHost({
          accel,
          runRoot,
          logRoot: path.join(dir, "logs"),
          layersDir: dir,
          volumesDir: path.join(dir, "volumes"),
        }),
        accel,
        store.blobs,
      );
      const nics = await testNics();
      return {
        host,
        dir,
        blobs: store.blobs,
        runRoot,
        // Built by setup into this machine's image store (the QEMU host's default one).
        image: "sandtree/debian",
        // QEMU's guest agent takes one client: restart.test.ts covers adoption by a new process.
        adoptsLive: false,
        nic: nics?.nic ?? null,
        echoServer: (port) => `exec python3 -c "${ECHO_PY}" ${port}`,
        spec: (vm, rootDisk) => smallGuestSpec({ name: vm, accel, rootDisk }),
        close: async () => {
          await close();
          await store.close();
          await nics?.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    120_000,
  );
}

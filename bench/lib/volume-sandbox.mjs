// The guest both volumes benches measure: one sandtree/debian sandbox (1 core, 512 MiB) on a tap of
// its own (deny-all rules, the volume server's ports DNATed as the platform does), with one host
// directory mounted at /mnt/vol over NFSv3 from a VolumeFileServer (NFS-Ganesha) of the bench's
// own. `close()` stops the VM, Ganesha, the tap and the rules, and removes the bench's directory.
import childProcess from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import path from "node:path";
import { detectAccel, guestArtifacts, ImageStore, NetworkManager, VolumeFileServer } from "../../packages/host/dist/index.js";
import { createOverlay, QemuMachineHost } from "../../packages/host/dist/qemu.js";

/** Runs argv in the guest as root: its stdout (throws with stderr on a non-zero exit). */
export async function guestRun(machine, argv, timeoutMs = 900_000) {
  const exec = machine.exec({ argv, user: "root", env: {}, timeoutMs });
  let out = "";
  let err = "";
  let code = -1;
  for await (const ev of exec.events) {
    if (ev.type === "stdout") out += ev.data;
    else if (ev.type === "stderr") err += ev.data;
    else if (ev.type === "exit") code = ev.info.exit_code;
  }
  if (code !== 0) throw new Error(`${argv.join(" ").slice(0, 200)} failed: ${err}${out}`);
  return out;
}

/** CPU seconds (user + system) a process has used so far, from /proc/PID/stat (0 when it is gone). */
export function cpuSeconds(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
}

// Bench-only: a property for the NIC's `-device virtio-net-device,...` argument of the next QEMU
// spawned (an A/B of a device property without a product option): spawn is wrapped once, and
// every other argument is the product's own.
let nicExtra = "";
const spawn = childProcess.spawn;
childProcess.spawn = function (file, argv, ...rest) {
  if (nicExtra && Array.isArray(argv) && argv.some((a) => a.startsWith("virtio-net-device,"))) {
    argv = argv.map((a) => (a.startsWith("virtio-net-device,") ? `${a},${nicExtra}` : a));
    nicExtra = "";
  }
  return spawn.call(this, file, argv, ...rest);
};
syncBuiltinESMExports();

/**
 * Starts the sandbox. `prefix` names the bench's temporary directory and tap tag; `octet` is the
 * second octet of its 10.x.y.0/24 (each bench its own, so two benches never share a subnet);
 * `beforeStart(dir, share)` fills the share before the guest mounts it; `nicProperty`
 * (e.g. `rx_queue_size=1024`) is added to its NIC's device (bench-only, see above).
 */
export async function startVolumeSandbox({ prefix, octet, beforeStart, nicProperty }) {
  const dir = mkdtempSync(`/tmp/${prefix}-`);
  // The volume `share` in the host's volumes directory.
  const share = path.join(dir, "volumes", "share", "data");
  mkdirSync(share, { recursive: true });
  beforeStart?.(dir, share);
  const volumes = await VolumeFileServer.open({ dir: path.join(dir, "nfs") });
  const net = new NetworkManager({
    tag: `${prefix.slice(-2)}${Math.floor(Math.random() * 999)}`,
    subnet: `10.${octet}.${Math.floor(Math.random() * 250)}.0/24`,
    resolverPort: 53,
    volumePorts: [volumes.ports.nfs, volumes.ports.mount],
  });
  const tap = net.tapName(0);
  const slot = net.slot(0);
  let machine;
  const close = async () => {
    await machine?.stop({ graceMs: 0 }).catch(() => {});
    await volumes.close();
    await net.deleteTap(tap).catch(() => {});
    await net.destroy().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await net.init([]);
    await net.createTap(tap, slot);
    const policy = { mode: "deny_all", allow: [], deny: [] };
    await net.addRules({ sandboxId: "bench", slot, tap, policy, tunnels: [], generation: 1, resolved: [] });
    const base = (await new ImageStore().resolve("sandtree/debian")).basePath;
    const disk = path.join(dir, "root.qcow2");
    await createOverlay(base, disk, 8 * 1024 ** 3);
    const { kernel, initramfs } = guestArtifacts();
    const accel = await detectAccel("auto");
    nicExtra = nicProperty ?? "";
    const host = new QemuMachineHost({
      volumes,
      runRoot: path.join(dir, "run"),
      logRoot: path.join(dir, "log"),
      layersDir: dir,
      volumesDir: path.join(dir, "volumes"),
    });
    machine = await host.start({
      name: prefix,
      accel,
      cpuCores: 1,
      memoryMb: 512,
      kernel,
      initramfs,
      rootDisk: path.basename(disk),
      nic: { tap, guestNet: `${slot.address}/${slot.prefix} ${slot.gateway}` },
      mounts: [{ volume: "share", guestPath: "/mnt/vol" }],
    });
    return { machine, volumes, net, tap, slot, dir, share, accel, close };
  } catch (e) {
    await close();
    throw e;
  }
}

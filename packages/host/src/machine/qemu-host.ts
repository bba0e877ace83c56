import type { MachineHost } from "./machine.js";
import { type DiskCache, QemuMachineHost, type QemuMachineHostOptions } from "./qemu-machine-host.js";

export type { DiskCache, QemuMachineHostOptions };

/** This machine's QEMU microVMs as a MachineHost (the server's default host). */
export function createQemuHost(opts: QemuMachineHostOptions): MachineHost {
  return new QemuMachineHost(opts);
}

import type { QemuVmSpec } from "../../src/vmm/qemu-args.js";

/** The smallest QEMU spec the argument builders take: placeholder paths, one vCPU, 256 MiB, TCG. */
export const TINY_QEMU_SPEC = {
  name: "x",
  accel: "tcg",
  cpuCores: 1,
  memoryMb: 256,
  kernel: "vmlinuz",
  initramfs: "initrd",
  agentSocket: "a",
  qmpSocket: "q",
  consoleLog: "c",
  pidFile: "p",
} satisfies QemuVmSpec;

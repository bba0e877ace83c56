// The QEMU implementation's own modules, for its tests and benchmarks ("@sandtree/host/qemu").
// The server never imports this entry: it holds a MachineHost (see index.ts).
export * from "./disks/layers.js";
export * from "./disks/overlay.js";
export * from "./machine/index.js";
export * from "./network/tap-owner.js";
export * from "./snapshots/memory-images.js";
export * from "./snapshots/migration.js";
export { ramDirFor } from "./snapshots/ram-placement.js";
export * from "./snapshots/template-store.js";
export { freePageReporting } from "./vmm/free-page-reporting.js";
export * from "./vmm/jail.js";
export * from "./vmm/qemu-args.js";
export { jailRootOf } from "./vmm/qemu-launch.js";
export * from "./vmm/qemu-vm.js";
export * from "./vmm/qmp-client.js";

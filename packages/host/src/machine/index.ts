export * from "./machine.js";
export * from "./nested.js";
export { QemuMachine } from "./qemu-machine.js";
export { QemuMachineHost } from "./qemu-machine-host.js";

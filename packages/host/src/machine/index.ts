export * from "./machine.js";
export * from "./nested.js";
export { QemuMachineHost } from "./qemu-host.js";
export { QemuMachine } from "./qemu-machine.js";

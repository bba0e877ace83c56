export * from "./machine.js";
export * from "./nested.js";
export { QemuMachine, QemuMachineHost } from "./qemu-machine.js";

export * from "./machine.js";
export { QemuMachine, QemuMachineHost } from "./qemu-machine.js";

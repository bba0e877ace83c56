// The host package's public face: the machine interface (machine/machine.ts), the QEMU
// implementation's factory, the remote host (a worker's host over the network, both halves), and the modules that are not machines (images, blobs, network,
// fleet, volumes' file server). QEMU's own modules are reached through "@sandtree/host/qemu"
// (tests and benchmarks of the implementation), never by the server.

export type { Accel } from "@sandtree/protocol";
export * from "./agent/agent-client.js";
export * from "./agent/frame-codec.js";
export * from "./agent/guest-error.js";
export * from "./api-errors.js";
export * from "./blobs/blob-store.js";
export * from "./blobs/local-dir-blob-store.js";
export * from "./blobs/s3-blob-store.js";
export { sha256File } from "./disks/layers.js";
export * from "./fleet/capacity.js";
export * from "./fleet/run-worker.js";
export * from "./fleet/worker-agent.js";
export * from "./images/index.js";
export { blockDeviceOf } from "./limits/block-device.js";
export * from "./limits/cgroup-fs.js";
export * from "./limits/machine-cgroups.js";
export * from "./limits/machine-limiter.js";
export * from "./limits/machine-limits.js";
export * from "./limits/tap-rate.js";
export { CONSOLE_TAIL_MAX_BYTES, type ConsoleTail } from "./machine/console-tail.js";
export { dialGuestPort, PORT_CONNECT_TIMEOUT_MS } from "./machine/guest-port.js";
export * from "./machine/machine.js";
export { nestedSupport } from "./machine/nested.js";
export { createQemuHost, type DiskCache, type QemuMachineHostOptions } from "./machine/qemu-host.js";
export * from "./network/address-pool.js";
export * from "./network/addresses.js";
export * from "./network/dns-message.js";
export * from "./network/dns-resolver.js";
export * from "./network/host-networks.js";
export * from "./network/network-manager.js";
export { SandboxNetworks, type SandboxNetworksOptions } from "./network/sandbox-networks.js";
export * from "./paths.js";
export * from "./remote.js";
export type { MemoryImage, MemoryImages, MemoryShape } from "./snapshots/memory-images.js";
export type { Template, TemplateInputs, TemplateStore, TemplateTaps } from "./snapshots/template-store.js";
export * from "./util/deadline.js";
export * from "./util/pid-alive.js";
export * from "./util/run-command.js";
export * from "./vmm/accel.js";
export {
  cpuIdentity,
  hostCpuSignature,
  KVM_CPU_MODEL_PATTERN,
  kvmCpuModel,
  setKvmCpuModel,
} from "./vmm/cpu-identity.js";
export { defaultJailConfig, type JailConfig, renameKeepingGrants } from "./vmm/jail.js";
export * from "./volumes/file-server.js";
export * from "./volumes/guest-mount.js";
export type * from "./volumes/host-volumes.js";
export { LocalVolumes } from "./volumes/local-volumes.js";
export * from "./volumes/volume-dirs.js";
export * from "./volumes/volume-image.js";

import { readFileSync } from "node:fs";
import type { Accel } from "@sandtree/protocol";
import { cpuIdentity, kvmCpuModel } from "./cpu-identity.js";

/**
 * TCG's translation cache, in MiB (QEMU's default is 1 GiB). An idle clone fills 16-18 MiB of it
 * (huge pages); a smaller cap lowers PSS but flushes and retranslates (8 MiB: `exec true` 18x
 * slower, heavy execs 1.5-2.7x: docs/architecture.md, "What an idle sandbox costs").
 */
export const TCG_TB_SIZE_MB = 256;

/**
 * The translation cache cap a VM starts with: TCG_TB_SIZE_MB, or SANDTREE_TCG_TB_MB (1-1024) where
 * set (measuring the trade: bench/density.mjs). Not part of any saved state.
 */
export function tcgTbSizeMb(): number {
  const v = Number(process.env.SANDTREE_TCG_TB_MB);
  return Number.isInteger(v) && v >= 1 && v <= 1024 ? v : TCG_TB_SIZE_MB;
}

export type { Accel };

/** Block node name of the root disk as QEMU is started. */
export const ROOT_NODE = "disk0";

/** A guest's name, accelerator, size and boot files: what the machine spec, the VM's options and QEMU's spec all start from. */
export interface GuestBoot {
  name: string;
  accel: Accel;
  cpuCores: number;
  memoryMb: number;
  kernel: string;
  initramfs: string;
}

export interface QemuVmSpec extends GuestBoot {
  /** qcow2 root disk; absent boots the initramfs alone (`sandtree.root=none`). */
  rootDisk?: string;
  /** The root disk's own file opened O_DIRECT (its backing chain stays in the host's page cache): see DiskCache. */
  directDisk?: boolean;
  /** The kernel's modules as a read-only ext4 (build-guest.sh), mounted by init at /lib/modules/$release. */
  modulesDisk?: string;
  agentSocket: string;
  qmpSocket: string;
  consoleLog: string;
  pidFile: string;
  extraKernelArgs?: string[];
  /** Hardware virtualization for the guest (its own KVM): see cpuModel. */
  nested?: boolean;
  /**
   * Guest RAM in a file: `share: true` for a template (its RAM is saved by being the file),
   * `share: false` for a clone (a private copy-on-write mapping of the template's file).
   */
  memoryFile?: { path: string; share: boolean };
  /** Start paused, waiting for `migrate-incoming` (restoring a saved state). */
  incoming?: boolean;
  /** A virtio-net NIC on this (already created) tap device. */
  tap?: string;
  /** The same NIC on no network (a hub port alone): a VM that never runs, loading a saved state. */
  nicUnplugged?: boolean;
  /** virtio-balloon with free page reporting (free-page-reporting.ts: launchQemu decides by host; false turns it off). */
  freePageReporting?: boolean;
}

/**
 * Every guest NIC has this MAC: each tap is its own link, and templates and memory snapshots
 * carry the device's state, so clones must see the same hardware as their source.
 */
export const GUEST_MAC = "52:54:00:5a:4e:01";

/**
 * Bumped whenever the devices or their properties change: saved states (templates, memory
 * checkpoints) only restore into the same device model, so template keys include it.
 */
export const DEVICE_MODEL = 6;

/**
 * The guest CPU under TCG: QEMU's default model plus ARAT (the local APIC timer keeps running in
 * deep idle). Without ARAT the guest's only clock-event device may stop in idle, so the kernel
 * never leaves its periodic tick: an idle guest takes 250 timer interrupts a second, ~3.5% of a
 * host core under TCG, and 64 idle sandboxes fill 2 cores. With it the tick stops when the guest
 * is idle (NOHZ): ~10 interrupts a second, ~0.5% (`bench/floor-clone-cpu.py` measures clones).
 */
export const TCG_CPU_MODEL = "qemu64,+arat";

/**
 * The one place that decides the guest CPU. By default the guest sees no hardware
 * virtualization: QEMU's `qemu64` model exposes AMD SVM under TCG, so root in a guest could load
 * `kvm_amd` and drive the host's emulator through it (FACTS.md); under KVM, `host` passes VMX/SVM
 * through where the host allows nesting. With `nested` the guest gets them on purpose: SVM and
 * nested paging under TCG (its `/dev/kvm` works: TCG emulates SVM), the host's own CPU under KVM
 * (checked by `nestedSupport` first). Saved states restore only into the same model, so template
 * and memory-image keys include this string.
 */
export function cpuModel(accel: Accel, nested: boolean): string {
  if (accel === "kvm") {
    // A named model (the fleet's choice, cpu-identity.ts) must be whole on this host: `enforce`
    // refuses to start rather than give guests a CPU without some of the model's features.
    const model = kvmCpuModel();
    return `${model}${nested ? "" : ",-vmx,-svm"}${model === "host" ? "" : ",enforce"}`;
  }
  return nested ? `${TCG_CPU_MODEL},+svm,+npt` : `${TCG_CPU_MODEL},-svm`;
}

/**
 * The CPU part of a saved state's cache key: the model string and the CPU it stands for (under
 * `-cpu host`, this host's: a template or memory image built on one CPU is never loaded on another).
 */
export function cpuKey(accel: Accel, nested: boolean): string {
  const model = cpuModel(accel, nested);
  return accel === "kvm" ? `${model}@${cpuIdentity(accel)}` : model;
}

let tscKhzCache: number | null | undefined;

/**
 * The host TSC frequency in kHz from /proc/cpuinfo. Under TCG a guest that must calibrate
 * its TSC against the PIT stalls when many boot at once (FACTS.md), so we pass it in.
 */
export function hostTscKhz(): number | null {
  if (tscKhzCache !== undefined) return tscKhzCache;
  try {
    const m = /^cpu MHz\s*:\s*([\d.]+)/m.exec(readFileSync("/proc/cpuinfo", "utf8"));
    tscKhzCache = m?.[1] ? Math.round(Number.parseFloat(m[1]) * 1000) : null;
  } catch {
    tscKhzCache = null;
  }
  return tscKhzCache;
}

/**
 * Kernel arguments that keep an idle guest asleep (bench/idle-trace.mjs traces its wake-ups from
 * inside). `compaction_proactiveness=0`: kcompactd otherwise wakes every 500 ms to check
 * fragmentation (2 of an idle guest's ~8 wake-ups a second, each restarting the tick); `psi=0`: no
 * pressure-stall averaging work every 2 s (/proc/pressure is absent in the guest). Template keys
 * include them (a template booted without them would keep waking).
 */
export const IDLE_KERNEL_ARGS = ["sysctl.vm.compaction_proactiveness=0", "psi=0"];

export function kernelCmdline(
  spec: Pick<QemuVmSpec, "accel" | "rootDisk" | "modulesDisk" | "extraKernelArgs" | "nested">,
): string {
  // nowatchdog: no soft-lockup hrtimer waking every idle guest every 4 s (a stalled TCG vCPU
  // on a loaded host is no lockup worth a report).
  const args = ["console=ttyS0", "quiet", "panic=-1", "reboot=t", "nowatchdog", ...IDLE_KERNEL_ARGS];
  if (spec.accel === "tcg") {
    const khz = hostTscKhz();
    if (khz) args.push(`tsc_early_khz=${khz}`, `lpj=${khz * 4}`);
    // TCG's TSC follows the host clock; its timer ticks do not on a loaded host. The clocksource
    // watchdog compares the two, marked the TSC unstable and moved the guest to refined-jiffies,
    // whose clock then lost seconds (a restored guest's, right after the host set it).
    args.push("tsc=reliable");
  }
  if (!spec.rootDisk) args.push("sandtree.root=none");
  if (spec.modulesDisk) args.push("sandtree.modules=on");
  // init loads the KVM modules for the guest's CPU so /dev/kvm is there without a modprobe.
  if (spec.nested) args.push("sandtree.kvm=on");
  args.push(...(spec.extraKernelArgs ?? []));
  return args.join(" ");
}

/** The argv for one microVM; the only place that knows QEMU's flags. */
export function buildQemuArgs(spec: QemuVmSpec): string[] {
  const args = [
    "-name",
    spec.name,
    "-M",
    // No i8254 PIT under TCG: Linux leaves it counting (mode 3, count 0) after moving to the
    // local APIC timer, and QEMU then wakes its main loop every 27 ms for a timer nobody reads:
    // a bare idle guest took 0.27% of a core with it, 0.10% without (same run). The TSC
    // frequency and lpj are passed in, so the kernel never calibrates against it. KVM keeps it:
    // emulated in the host kernel, and without it a bare nested-KVM boot took twice as long
    // (bench/kvm-tuning.py, docs/architecture.md).
    `microvm${spec.accel === "tcg" ? ",pit=off" : ""},memory-backend=mem`,
    "-accel",
    // TCG's translation cache defaults to 1 GiB, resident as the guest runs more code: capped so
    // QEMU's memory stays within its cgroup's allowance (QEMU_OVERHEAD_MB, limits/machine-limits.ts).
    spec.accel === "tcg" ? `tcg,tb-size=${tcgTbSizeMb()}` : spec.accel,
    "-m",
    `${spec.memoryMb}M`,
    "-smp",
    String(spec.cpuCores),
    "-nodefaults",
    "-no-user-config",
    "-display",
    "none",
    "-no-reboot",
    "-chardev",
    `file,id=console,path=${spec.consoleLog}`,
    "-serial",
    "chardev:console",
    "-qmp",
    `unix:${spec.qmpSocket},server=on,wait=off`,
    "-pidfile",
    spec.pidFile,
  ];
  // A restored VM runs the kernel already in its RAM (and -no-reboot never boots another): QEMU
  // would keep the kernel file's whole image in its own memory for nothing (14 MiB per VM).
  if (!spec.incoming) args.push("-kernel", spec.kernel, "-initrd", spec.initramfs, "-append", kernelCmdline(spec));
  args.push("-cpu", cpuModel(spec.accel, spec.nested === true));
  // RAM is always the backend object `mem`, so a state saved from any VM (plain RAM, template,
  // clone) names the same RAM block and restores into any other.
  if (spec.memoryFile) {
    const { path, share } = spec.memoryFile;
    args.push("-object", `memory-backend-file,id=mem,size=${spec.memoryMb}M,mem-path=${path},share=${share ? "on" : "off"}`);
  } else {
    args.push("-object", `memory-backend-ram,id=mem,size=${spec.memoryMb}M`);
  }
  if (spec.incoming) args.push("-incoming", "defer");
  if (spec.rootDisk) {
    // -blockdev with a node name, so disk snapshots can stack overlays we create ourselves;
    // the backing chain is read from each qcow2 header (relative names resolve beside the file).
    args.push(
      "-blockdev",
      `driver=qcow2,node-name=${ROOT_NODE},discard=unmap,file.driver=file,file.filename=${spec.rootDisk}${spec.directDisk ? ",file.cache.direct=on" : ""}`,
      "-device",
      `virtio-blk-device,drive=${ROOT_NODE}`,
    );
  }
  if (spec.modulesDisk) {
    // Shared by every VM, never written: the guest finds it by its serial.
    args.push(
      "-blockdev",
      `driver=raw,node-name=modules,read-only=on,file.driver=file,file.filename=${spec.modulesDisk},file.locking=off`,
      "-device",
      "virtio-blk-device,drive=modules,serial=sandtree-modules",
    );
  }
  if (spec.tap || spec.nicUnplugged) {
    args.push(
      "-netdev",
      spec.tap ? `tap,id=net0,ifname=${spec.tap},script=no,downscript=no` : "hubport,id=net0,hubid=0",
      "-device",
      // No guest announce: after a restore QEMU would make the guest send announcements for a
      // while (meant for live migration between hosts; each tap is its own link), which cost a
      // restored clone ~200 ms before it answered under TCG.
      `virtio-net-device,netdev=net0,mac=${GUEST_MAC},guest_announce=off`,
    );
  }
  args.push(
    "-device",
    "virtio-serial-device",
    "-chardev",
    `socket,id=agent,path=${spec.agentSocket},server=on,wait=off`,
    "-device",
    "virtserialport,chardev=agent,name=agent",
  );
  // Last, so the devices before it keep their virtio-mmio slots. No statistics polling (no timer):
  // only the guest's reports of freed 2 MiB blocks, which QEMU discards (free-page-reporting.ts).
  if (spec.freePageReporting) args.push("-device", "virtio-balloon-device,free-page-reporting=on");
  return args;
}

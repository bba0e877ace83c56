// The project's own raw path (labelled project_raw, never floor): a QemuVm of the built guest
// (kernel, initramfs) on an overlay of an image's base, with no server in the way.
import path from "node:path";
import { guestArtifacts } from "@sandtree/host";
import { createOverlay } from "@sandtree/host/qemu";

/**
 * QemuVm.start's options for a raw VM named `bench-${tag}` (1 core, `memoryMb`) on a new overlay
 * of `image`'s base of `diskBytes`, its files under `work`; `initramfs` stands in for the built
 * one (an older guest, to compare). The overlay is made here, so a caller times QemuVm.start alone.
 */
export async function rawVmOptions(work, { accel, image, tag, memoryMb, diskBytes, initramfs }) {
  const guest = guestArtifacts();
  const overlay = path.join(work, `${tag}.qcow2`);
  await createOverlay(image.basePath, overlay, diskBytes);
  return {
    name: `bench-${tag}`,
    accel,
    cpuCores: 1,
    memoryMb,
    kernel: guest.kernel,
    initramfs: initramfs ?? guest.initramfs,
    rootDisk: overlay,
    runDir: path.join(work, `${tag}-run`),
    logDir: path.join(work, `${tag}-log`),
  };
}

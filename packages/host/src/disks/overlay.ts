import { runCommand } from "../util/run-command.js";

/** A copy-on-write qcow2 overlay over an image's base; the base is never written. */
export async function createOverlay(
  base: string,
  overlay: string,
  sizeBytes: number,
  opts: { signal?: AbortSignal } = {},
): Promise<void> {
  await runCommand(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, overlay, String(sizeBytes)], opts);
}

import { SandtreeError } from "@sandtree/protocol";
import type { ExecSpec, MachineExec } from "../machine/machine.js";
import { type GuestMount, mountHelperArgv } from "./guest-mount.js";

/**
 * The readahead given to each volume's mount (its BDI's read_ahead_kb), in KiB. The guest kernel
 * gives an NFS mount 128 KiB, so a sequential read asks for 128 KiB at a time although rsize
 * allows 1 MiB: under TCG each round trip costs the guest's whole network path. 4 MiB measured
 * best of 128 KiB, 1, 4 and 16 MiB (bench/volumes-read.mjs; docs/architecture.md, "Volumes").
 */
export const VOLUME_READAHEAD_KB = 4096;

/**
 * Sets the readahead of the mount at `target` (found by its mount point in /proc/self/mountinfo,
 * whose third field is the BDI's major:minor) with the image's /bin/sh builtins only.
 */
function readaheadArgv(target: string): string[] {
  const script =
    'while read -r _ _ dev _ mp _; do [ "$mp" = "$1" ] && echo "$2" > "/sys/class/bdi/$dev/read_ahead_kb"; done < /proc/self/mountinfo; exit 0';
  return ["/bin/sh", "-c", script, "sh", target, String(VOLUME_READAHEAD_KB)];
}

/**
 * Mounts each volume in the guest with the agent's own mount helper, as root, one after the
 * other (a later mount may sit inside an earlier one). The helper leaves a mount that is there
 * already (a memory checkpoint's clone) as it is. A failure is VOLUME_MOUNT_FAILED with the
 * guest's words. Each mount then gets VOLUME_READAHEAD_KB, where the image has a /bin/sh (a
 * speed, not a need: an image without one reads with the kernel's default).
 */
export async function mountInGuest(
  machine: { exec(spec: ExecSpec): MachineExec },
  mounts: GuestMount[],
  opts: { timeoutMs: number },
): Promise<void> {
  for (const m of mounts) {
    const exec = machine.exec({ argv: mountHelperArgv(m), user: "root", env: {}, timeoutMs: opts.timeoutMs });
    let output = "";
    let code: number | null = null;
    for await (const ev of exec.events) {
      if ((ev.type === "stdout" || ev.type === "stderr") && output.length < 4096) output += ev.data.toString("utf8");
      else if (ev.type === "exit") code = ev.info.timed_out ? -1 : ev.info.exit_code;
    }
    if (code !== 0) {
      const why = code === -1 ? `no answer in ${Math.round(opts.timeoutMs / 1000)} s` : output.trim() || `exit ${code}`;
      throw new SandtreeError("VOLUME_MOUNT_FAILED", `mounting a volume at ${m.target} failed: ${why}`, {
        path: m.target,
      });
    }
    const ra = machine.exec({ argv: readaheadArgv(m.target), user: "root", env: {}, timeoutMs: opts.timeoutMs });
    try {
      for await (const _ of ra.events);
    } catch {}
  }
}

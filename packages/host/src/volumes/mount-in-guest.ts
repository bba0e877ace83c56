import { SandtreeError } from "@sandtree/protocol";
import type { ExecSpec, MachineExec } from "../machine/machine.js";
import { type GuestMount, mountHelperArgv } from "./guest-mount.js";

/**
 * Mounts each volume in the guest with the agent's own mount helper, as root, one after the
 * other (a later mount may sit inside an earlier one). The helper leaves a mount that is there
 * already (a memory checkpoint's clone) as it is. A failure is VOLUME_MOUNT_FAILED with the
 * guest's words.
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
  }
}

import { type AgentExecEvent, guestArtifacts, type MachineSpec } from "../../src/index.js";

/** Why this machine cannot boot a guest (no kernel or initramfs in the cache), or null. */
export function artifactsMissing(): string | null {
  try {
    guestArtifacts();
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/** All an exec printed and how it ended (`code` -1 when no exit came). */
export async function execOutput(exec: {
  events: AsyncIterable<AgentExecEvent>;
}): Promise<{ out: string; err: string; code: number; timedOut: boolean }> {
  let out = "";
  let err = "";
  let code = -1;
  let timedOut = false;
  for await (const ev of exec.events) {
    if (ev.type === "stdout") out += ev.data.toString();
    else if (ev.type === "stderr") err += ev.data.toString();
    else if (ev.type === "exit") {
      code = ev.info.exit_code;
      timedOut = ev.info.timed_out;
    }
  }
  return { out, err, code, timedOut };
}

/** A one-vCPU, 256 MiB machine booting this cache's guest kernel and initramfs; the rest as given. */
export function smallGuestSpec<S extends Pick<MachineSpec, "name" | "accel" | "rootDisk">>(s: S) {
  const { kernel, initramfs } = guestArtifacts();
  return { cpuCores: 1, memoryMb: 256, kernel, initramfs, ...s };
}

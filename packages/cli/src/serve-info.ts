import { accessSync, constants } from "node:fs";
import type { Accel, AccelChoice } from "@sandtree/protocol";

/** What `sandtree serve` says about itself once it listens: the accelerator and sandbox networks. */
export interface ServeFacts {
  /** --accel, else SANDTREE_ACCEL, else auto. */
  choice: AccelChoice;
  /** Where the choice came from, for the message. */
  choiceFrom: "--accel" | "SANDTREE_ACCEL" | "default";
  accel: Accel;
  /** Whether /dev/kvm could be opened read-write. */
  kvmDevice: boolean;
  networkEnabled: boolean;
  /** Why sandboxes get no network (null when they do). */
  networkUnavailable: string | null;
}

export function kvmDeviceUsable(): boolean {
  try {
    accessSync("/dev/kvm", constants.R_OK | constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

export function serveInfoLines(f: ServeFacts): string[] {
  let why: string;
  if (f.choice !== "auto") why = `set by ${f.choiceFrom === "default" ? "configuration" : f.choiceFrom}`;
  else if (f.accel === "kvm") why = "auto: a trial KVM boot succeeded";
  else if (!f.kvmDevice) why = "auto: no usable /dev/kvm, so QEMU's software CPU (slower)";
  else
    why =
      "auto: a trial KVM boot failed, so QEMU's software CPU (slower); the verdict is cached in $SANDTREE_CACHE_DIR/accel.json (delete it to try again)";
  const net = f.networkEnabled
    ? "sandbox networks: on"
    : `sandbox networks: off (${f.networkUnavailable ?? "unavailable"}; set SANDTREE_NETWORK=on as root with nftables, iproute2 and /dev/net/tun)`;
  return [`accelerator: ${f.accel} (${why})`, net];
}

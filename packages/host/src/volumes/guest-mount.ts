/**
 * The address guests mount volumes from: link-local, the same in every sandbox, DNATed by each
 * sandbox's nftables chain to its own gateway (the host's end of its tap). A memory fork's
 * children keep their parent's mounts although each has another gateway.
 */
export const VOLUME_SERVER_ADDRESS = "169.254.171.1";

/** A volume to mount in a machine (MachineSpec.mounts). */
export interface VolumeMount {
  /**
   * The volume's name in the host's volumes directory (given to the host when it is made), never
   * a path: the host resolves it there (volumeDataDir); a path-shaped name is VALIDATION_FAILED.
   */
  volume: string;
  /** Absolute path in the guest; created when missing. */
  guestPath: string;
  readOnly?: boolean;
}

/** What the guest's mount helper is given for one mount. */
export interface GuestMount {
  source: string;
  target: string;
  type: "nfs";
  options: string;
  readOnly: boolean;
}

/**
 * The kernel's own NFS option text (no mount.nfs in the guest): NFSv3 over TCP with the MOUNT
 * protocol at an explicit port (no rpcbind), no lock manager (locks are local to one guest),
 * hard (a restarted server delays, never fails, an operation) with a short retransmit timeout
 * so a fork's child, whose old connection left from its parent's address, reconnects within
 * seconds. Close-to-open consistency (the default `cto`): a reader's open() sees what a writer
 * flushed with fsync() or close().
 */
export function nfsOptions(ports: { nfs: number; mount: number }): string {
  const a = VOLUME_SERVER_ADDRESS;
  return [
    "vers=3",
    "proto=tcp",
    `port=${ports.nfs}`,
    `addr=${a}`,
    "mountvers=3",
    "mountproto=tcp",
    `mountport=${ports.mount}`,
    `mountaddr=${a}`,
    "nolock",
    "hard",
    "timeo=50",
    "retrans=3",
    "rsize=1048576",
    "wsize=1048576",
  ].join(",");
}

/** The guest's mount helper as an argv: the agent binary run as `/proc/1/exe mount ...`. */
export function mountHelperArgv(m: GuestMount): string[] {
  return ["/proc/1/exe", "mount", m.source, m.target, m.type, m.options, ...(m.readOnly ? ["ro"] : [])];
}

/** "ADDR/PREFIX GATEWAY" (MachineSpec.nic.guestNet) -> ADDR. */
export function guestAddressOf(guestNet: string): string {
  const addr = guestNet.split(/[/\s]/)[0] ?? "";
  if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(addr)) throw new RangeError(`no guest address in ${JSON.stringify(guestNet)}`);
  return addr;
}

import { runCommand } from "../util/run-command.js";

/**
 * Sets an existing tap's owner and group (TUNSETOWNER, TUNSETGROUP) after attaching to it
 * (TUNSETIFF, IFF_TAP | IFF_NO_PI, as `ip tuntap add` made it). `ip tuntap` can set them only
 * when it creates the tap, and re-creating it would drop what is bound to it (the resolver's
 * sockets, addresses, queueing rules); Node has no ioctl, so Python's does it.
 */
const SET_OWNER = [
  "import fcntl, os, struct, sys",
  'fd = os.open("/dev/net/tun", os.O_RDWR)',
  'fcntl.ioctl(fd, 0x400454ca, struct.pack("16sH22x", sys.argv[1].encode(), 0x0002 | 0x1000))',
  "fcntl.ioctl(fd, 0x400454cc, int(sys.argv[2]))",
  "fcntl.ioctl(fd, 0x400454ce, int(sys.argv[2]))",
].join("\n");

/**
 * The interpreter itself, asked once: `python3` on PATH may be a version manager's shim (a shell
 * script that runs the manager before Python), which cost 0.17-0.30 s a spawn on a loaded host,
 * on every start with a network; the interpreter it leads to starts in a few milliseconds.
 */
let interpreter: Promise<string> | null = null;
function python(): Promise<string> {
  interpreter ??= runCommand(["python3", "-S", "-I", "-c", "import sys; print(sys.executable)"]).then(
    (r) => r.stdout.trim() || "python3",
    () => "python3",
  );
  return interpreter;
}

/**
 * Makes the tap `tap` usable by `uid` (and gid `uid`): a jailed QEMU has no CAP_NET_ADMIN, and
 * attaching to a tap needs it unless the tap is the caller's own.
 */
export async function ownTap(tap: string, uid: number, opts: { via?: string } = {}): Promise<void> {
  await runCommand([opts.via ?? (await python()), "-S", "-I", "-c", SET_OWNER, tap, String(uid)]);
}

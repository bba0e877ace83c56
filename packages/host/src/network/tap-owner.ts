import { writeFileSync } from "node:fs";
import { networkInterfaces } from "node:os";
import { runCommand } from "../util/run-command.js";

/**
 * Makes the (existing) tap device `tap` usable by `uid` alone, as a jailed QEMU has no
 * CAP_NET_ADMIN to attach to a tap it does not own. A tap's owner is set only when it is
 * created (`ip tuntap add` opens it exclusively), so the tap is created again under the same
 * name with the same addresses: the firewall's rules match taps by name and stay as they are.
 */
export async function ownTap(tap: string, uid: number): Promise<void> {
  const addrs = (networkInterfaces()[tap] ?? []).filter((a) => a.family === "IPv4").map((a) => a.cidr);
  await runCommand(["ip", "-batch", "-"], {
    input: [
      `link del ${tap}`,
      `tuntap add dev ${tap} mode tap user ${uid} group ${uid}`,
      ...addrs.filter((c): c is string => c !== null).map((c) => `addr add ${c} dev ${tap}`),
      `link set ${tap} up`,
      "",
    ].join("\n"),
  });
  try {
    writeFileSync(`/proc/sys/net/ipv6/conf/${tap}/disable_ipv6`, "1");
  } catch {}
}

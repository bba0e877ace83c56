import { randomBytes } from "node:crypto";
import { Tag } from "@sandtree/protocol";
import { encodeTlv, type TlvValue } from "./frame-codec.js";

// The HELLO a host sends to synchronise with its guest: what it carries and when it is resent.

/**
 * When an unanswered HELLO is resent: a booting guest's may be lost, a restored guest's is late.
 * A booting guest's HELLOs are not lost while its agent has not opened the port: they wait in
 * the socket and the agent handles every one in turn once it opens it (each a clock set, reseed
 * and network set; the agent says READY then, which resends at once). Resent every second, a
 * template's guest under nested KVM (a 40 s boot) handled ~42 and counted them as generations:
 * the resend backs off to 8 s.
 */
export const BOOT_RETRY = { firstMs: 50, maxMs: 8000 };
export const RESTORE_RETRY = { firstMs: 1000, maxMs: 4000 };

/**
 * A HELLO's payload: its nonce, then the host's clock, fresh entropy, eth0's configuration
 * ("ADDR/PREFIX GATEWAY" or "-") and, for a clone waiting on its root disk, that disk's size.
 */
export function helloPayload(nonce: Buffer, net: string | null, root: number | null): Buffer {
  const tlv = encodeTlv([
    [Tag.TIME_NS, { u64: BigInt(Date.now()) * 1_000_000n }],
    [Tag.ENTROPY, randomBytes(64)],
    ...(net ? [[Tag.NET, net] as [number, TlvValue]] : []),
    ...(root !== null ? [[Tag.ROOT, { u64: BigInt(root) }] as [number, TlvValue]] : []),
  ]);
  return Buffer.concat([nonce, tlv]);
}

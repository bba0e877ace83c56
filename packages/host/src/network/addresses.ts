/** IPv4 arithmetic for the sandbox address pool. */

export function ipToInt(ip: string): number {
  const parts = ip.split(".").map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) {
    throw new RangeError(`not an IPv4 address: ${ip}`);
  }
  return (
    ((parts[0] as number) * 2 ** 24 + (parts[1] as number) * 2 ** 16 + (parts[2] as number) * 256 + (parts[3] as number)) >>> 0
  );
}

export function intToIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

export function parseCidr(cidr: string): { base: number; bits: number } {
  const [ip, bitsText] = cidr.split("/");
  const bits = Number(bitsText ?? "32");
  if (!ip || !Number.isInteger(bits) || bits < 0 || bits > 32) throw new RangeError(`not an IPv4 CIDR: ${cidr}`);
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return { base: (ipToInt(ip) & mask) >>> 0, bits };
}

export function cidrContains(cidr: string, ip: string): boolean {
  const { base, bits } = parseCidr(cidr);
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return (ipToInt(ip) & mask) >>> 0 === base;
}

/** Each sandbox owns a /30 of the pool: .0 network, .1 the host's end (gateway), .2 the guest. */
export interface SandboxSlot {
  index: number;
  gateway: string;
  address: string;
  prefix: 30;
}

export function slotOf(subnet: string, index: number): SandboxSlot {
  const { base, bits } = parseCidr(subnet);
  const slots = 2 ** (32 - bits) / 4;
  if (!Number.isInteger(index) || index < 0 || index >= slots) {
    throw new RangeError(`slot ${index} is outside ${subnet} (${slots} slots)`);
  }
  const net = base + index * 4;
  return { index, gateway: intToIp(net + 1), address: intToIp(net + 2), prefix: 30 };
}

export function slotCount(subnet: string): number {
  return 2 ** (32 - parseCidr(subnet).bits) / 4;
}

/** Tunnel K (0-based) of a sandbox answers at this link-local address inside it. */
export function tunnelAddress(k: number): string {
  if (k < 0 || k > 250) throw new RangeError("at most 250 tunnels");
  return `169.254.170.${k + 1}`;
}

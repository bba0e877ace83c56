// How numbers are shown: money to the cent (sub-cent amounts to four places, and under $0.0001
// as "<$0.0001", never a misleading $0.0000), bytes in binary units. No DOM here: the e2e test uses it.

export function usd(n: number | undefined): string {
  if (n === undefined) return "–";
  if (n > 0 && n < 0.0001) return "<$0.0001";
  const digits = n !== 0 && Math.abs(n) < 0.01 ? 4 : 2;
  return `$${n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })}`;
}

export function count(n: number): string {
  return n.toLocaleString("en-US");
}

export function percent(ratio: number): string {
  return `${(ratio * 100).toFixed(1)}%`;
}

export function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

/** "3m", "2h 5m", "4d 1h" since `iso` (until `endIso` when the sandbox ended). */
export function age(iso: string, endIso?: string | null): string {
  const s = Math.max(0, Math.floor(((endIso ? Date.parse(endIso) : Date.now()) - Date.parse(iso)) / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const hrs = Math.floor(m / 60);
  if (hrs < 24) return `${hrs}h ${m % 60}m`;
  return `${Math.floor(hrs / 24)}d ${hrs % 24}h`;
}

export function labels(l: Record<string, string>): string {
  return Object.entries(l)
    .map(([k, v]) => `${k}=${v}`)
    .join(", ");
}

/** A usage amount as `sandtree usage` prints it: integers as they are, others to three places. */
export function usageAmount(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(3);
}

/** A usage cost as `sandtree usage` prints it: to the millionth of a dollar. */
export function usageCost(usd: number): string {
  return `$${usd.toFixed(6)}`;
}

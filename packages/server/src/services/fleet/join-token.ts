import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { chmodSync, closeSync, openSync, readFileSync, statSync, writeSync } from "node:fs";
import path from "node:path";

/**
 * The fleet's join token: random, made at the first start, kept in `<data-dir>/join-token`
 * (mode 0600). `created` is true only on the start that made it (the one that prints it).
 */
export interface JoinToken {
  token: string;
  /** True only on the start that made it. */
  created: boolean;
  file: string;
}

export function loadOrCreateJoinToken(dataDir: string): JoinToken {
  const file = path.join(dataDir, "join-token");
  let created = false;
  try {
    const fd = openSync(file, "wx", 0o600);
    try {
      writeSync(fd, `stj_${randomBytes(32).toString("base64url")}\n`);
    } finally {
      closeSync(fd);
    }
    created = true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  // A token mounted read-only (a Kubernetes Secret with mode 0400 or 0600) is left as it is.
  if ((statSync(file).mode & 0o077) !== 0) chmodSync(file, 0o600);
  const token = readFileSync(file, "utf8").trim();
  if (token.length < 32) throw new Error(`${file} must hold a join token of at least 32 characters`);
  return { token, created, file };
}

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** Compares two secrets in time independent of where they differ (hashes make the lengths equal). */
export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(createHash("sha256").update(given).digest(), createHash("sha256").update(expected).digest());
}

/** Compares a secret with a stored sha256 hex of one, in constant time. */
export function matchesHash(given: string, hashHex: string): boolean {
  const expected = Buffer.from(hashHex, "hex");
  const actual = createHash("sha256").update(given).digest();
  return expected.length === actual.length && timingSafeEqual(actual, expected);
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearer(header: string | undefined): string | null {
  const m = header ? /^Bearer\s+(\S+)$/i.exec(header) : null;
  return m?.[1] ?? null;
}

/**
 * The key the control plane sends a worker's sandbox API: derived from the join token and the
 * host's current secret (HMAC), so neither side stores it, every control plane holding the join
 * token can compute it, and it changes whenever the worker registers again.
 */
export function workerCallKey(joinToken: string, hostId: string, secretHash: string): string {
  return `stw_${createHmac("sha256", joinToken).update(`sandtree-worker-call:${hostId}:${secretHash}`).digest("base64url")}`;
}

import { createHmac } from "node:crypto";
import path from "node:path";
import { SandtreeError } from "@sandtree/protocol";
import type { KeyFingerprints } from "../../store/key-fingerprints.js";

/** A key that every server on one database must hold, and the file it comes from. */
export interface SharedKey {
  name: "server.key" | "join-token";
  key: Buffer | string;
}

/** The HMAC of a constant under the key: equal keys give equal fingerprints, and it reveals nothing of the key. */
export function keyFingerprint(name: string, key: Buffer | string): string {
  return createHmac("sha256", key).update(`sandtree-key-fingerprint:${name}`).digest("hex");
}

/**
 * Refuses to start a server whose keys differ from those the database was first used with: the
 * server key seals sandbox secrets and signs idempotency keys, the join token derives the keys
 * workers answer, so control planes behind one load balancer that disagree would fail each
 * other's secrets and workers. A single server whose key file was replaced is caught the same way.
 */
export async function checkSharedKeys(store: KeyFingerprints, dataDir: string, keys: SharedKey[]): Promise<void> {
  for (const { name, key } of keys) {
    const mine = keyFingerprint(name, key);
    const recorded = await store.claim(name, mine);
    if (recorded !== mine)
      throw new SandtreeError(
        "KEY_MISMATCH",
        `${path.join(dataDir, name)} is not the ${name} this database was first used with: every control plane on one ` +
          `database holds the same ${name} (copy it from the first one's data dir, or mount the same secret)`,
        { file: name },
      );
  }
}

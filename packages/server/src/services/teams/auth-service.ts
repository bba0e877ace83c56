import { createHash, randomBytes } from "node:crypto";
import { SandtreeError } from "@sandtree/protocol";
import type { ApiKeyRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import { sameSecret } from "../fleet/join-token.js";

export interface Principal {
  teamId: string;
  keyId: string;
  isAdmin: boolean;
}

/** The key id of the control plane when it calls a worker (the only caller a worker takes). */
export const CONTROL_PLANE_KEY_ID = "control-plane";

export function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** API keys are random, shown once, and stored only as a sha256 hash. */
export class AuthService {
  private worker: { teamId: string; key: () => string | null } | null = null;

  constructor(private readonly store: Store) {}

  /**
   * A fleet worker answers only its control plane: the call key derived at registration (none
   * before it), compared in constant time, as an admin of the worker's own team. API keys are
   * refused: a worker holds no team's keys.
   */
  useWorkerKey(teamId: string, key: () => string | null): void {
    this.worker = { teamId, key };
  }

  /** First start: a default team and an admin key. Returns the key, or null when already set up. */
  async bootstrap(): Promise<string | null> {
    if ((await this.store.countTeams()) > 0) return null;
    const team = await this.store.createTeam("default");
    return this.createKey(team.id, true);
  }

  async createKey(teamId: string, isAdmin: boolean): Promise<string> {
    return (await this.issueKey(teamId, isAdmin)).key;
  }

  /** A new key: the plaintext (shown once) and the stored row. */
  async issueKey(teamId: string, isAdmin: boolean): Promise<{ key: string; row: ApiKeyRow }> {
    const key = `st_${randomBytes(24).toString("base64url")}`;
    const row = await this.store.createApiKey(teamId, hashKey(key), key.slice(0, 7), isAdmin);
    return { key, row };
  }

  async authenticate(header: string | undefined): Promise<Principal> {
    const m = header ? /^Bearer\s+(\S+)$/i.exec(header) : null;
    if (!m?.[1]) throw new SandtreeError("UNAUTHORIZED", "missing API key: send `Authorization: Bearer <SANDTREE_API_KEY>`");
    if (this.worker) {
      const expected = this.worker.key();
      if (!expected || !sameSecret(m[1], expected))
        throw new SandtreeError("UNAUTHORIZED", "this is a fleet worker: only its control plane calls it");
      return { teamId: this.worker.teamId, keyId: CONTROL_PLANE_KEY_ID, isAdmin: true };
    }
    const row = await this.store.findApiKey(hashKey(m[1]));
    if (!row || row.revoked_at) throw new SandtreeError("UNAUTHORIZED", "invalid or revoked API key");
    return { teamId: row.team_id, keyId: row.id, isAdmin: row.is_admin };
  }
}

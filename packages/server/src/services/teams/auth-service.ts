import { createHash, randomBytes } from "node:crypto";
import { SandtreeError } from "@sandtree/protocol";
import type { ApiKeyRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";

export interface Principal {
  teamId: string;
  keyId: string;
  isAdmin: boolean;
}

export function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** API keys are random, shown once, and stored only as a sha256 hash. */
export class AuthService {
  constructor(private readonly store: Store) {}

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
    const row = await this.store.findApiKey(hashKey(m[1]));
    if (!row || row.revoked_at) throw new SandtreeError("UNAUTHORIZED", "invalid or revoked API key");
    return { teamId: row.team_id, keyId: row.id, isAdmin: row.is_admin };
  }
}

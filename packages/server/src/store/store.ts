import type { Sandbox, SandboxStatus } from "@sandtree/protocol";

export interface TeamRow {
  id: string;
  name: string;
  created_at: string;
}

export interface ApiKeyRow {
  id: string;
  team_id: string;
  prefix: string;
  is_admin: boolean;
  created_at: string;
  revoked_at: string | null;
}

export interface SandboxFilter {
  status?: SandboxStatus;
  labels?: Record<string, string>;
  limit: number;
  /** Exclusive upper bound on the sequence number (pagination cursor). */
  beforeSeq?: number;
}

export type SandboxPatch = Partial<Omit<Sandbox, "id" | "team_id" | "created_at">>;

/**
 * The persistence seam: SQLite today, PostgreSQL later; each backend passes the same
 * conformance suite. Sandbox status changes are conditional (`from`) so concurrent
 * operations (a delete racing a create) cannot overwrite each other's transitions.
 */
export interface Store {
  createTeam(name: string): TeamRow;
  getTeamByName(name: string): TeamRow | undefined;
  countTeams(): number;
  createApiKey(teamId: string, keyHash: string, prefix: string, isAdmin: boolean): ApiKeyRow;
  findApiKey(keyHash: string): ApiKeyRow | undefined;

  insertSandbox(s: Sandbox): void;
  getSandbox(id: string, teamId?: string): Sandbox | undefined;
  listSandboxes(teamId: string, filter: SandboxFilter): { sandboxes: Sandbox[]; lastSeq: number | null };
  listSandboxesByStatus(statuses: readonly SandboxStatus[]): Sandbox[];
  /** Applies the patch only when the current status is one of `from` (if given); true when applied. */
  updateSandbox(id: string, patch: SandboxPatch, from?: readonly SandboxStatus[]): boolean;

  addEvent(sandboxId: string, message: string): void;
  listEvents(sandboxId: string, limit: number): Array<{ at: string; message: string }>;
  close(): void;
}

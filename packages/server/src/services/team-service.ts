import {
  type ApiKey,
  type CreatedApiKey,
  DEFAULT_TEAM_LIMITS,
  SandtreeError,
  type Team,
  type TeamLimits,
  type TeamLimitsResponse,
  type UpdateTeamLimitsRequest,
} from "@sandtree/protocol";
import type { ApiKeyRow, TeamRow } from "../store/rows.js";
import type { Store } from "../store/store.js";
import type { AdmissionService } from "./admission-service.js";
import type { AuthService, Principal } from "./auth-service.js";

/** Teams, API keys and team limits. Everything here needs an admin key, except reading one's own limits. */
export class TeamService {
  constructor(
    private readonly store: Store,
    private readonly auth: AuthService,
    private readonly admission: AdmissionService,
  ) {}

  private requireAdmin(p: Principal, what: string): void {
    if (!p.isAdmin) throw new SandtreeError("FORBIDDEN", `${what} needs an admin key`);
  }

  private teamByName(name: string): TeamRow {
    const team = this.store.getTeamByName(name);
    if (!team) throw new SandtreeError("TEAM_NOT_FOUND", `team ${name} not found`, { team: name });
    return team;
  }

  createTeam(p: Principal, name: string): Team {
    this.requireAdmin(p, "creating a team");
    if (this.store.getTeamByName(name)) throw new SandtreeError("ALREADY_EXISTS", `team ${name} already exists`, { team: name });
    return this.store.createTeam(name);
  }

  listTeams(p: Principal): Team[] {
    this.requireAdmin(p, "listing teams");
    return this.store.listTeams();
  }

  createKey(p: Principal, teamName: string, admin: boolean): CreatedApiKey {
    this.requireAdmin(p, "creating an API key");
    const team = this.teamByName(teamName);
    const { key, row } = this.auth.issueKey(team.id, admin);
    return { ...this.view(row, team.name), key };
  }

  listKeys(p: Principal): ApiKey[] {
    this.requireAdmin(p, "listing API keys");
    const names = new Map(this.store.listTeams().map((t) => [t.id, t.name]));
    return this.store.listApiKeys().map((k) => this.view(k, names.get(k.team_id) ?? k.team_id));
  }

  /** Revoked at once: every request looks its key up, so the next one is refused. */
  revokeKey(p: Principal, id: string): ApiKey {
    this.requireAdmin(p, "revoking an API key");
    const row = this.store.getApiKey(id);
    if (!row) throw new SandtreeError("KEY_NOT_FOUND", `API key ${id} not found`, { id });
    if (row.is_admin && !row.revoked_at && this.store.countActiveAdminKeys() <= 1) {
      throw new SandtreeError("CONFLICT", "this is the last admin key; create another admin key before revoking it", { id });
    }
    this.store.revokeApiKey(id);
    const after = this.store.getApiKey(id) ?? row;
    return this.view(after, this.store.getTeam(after.team_id)?.name ?? after.team_id);
  }

  getLimits(p: Principal, teamName: string): TeamLimitsResponse {
    const team = this.teamByName(teamName);
    // A team may read its own limits; other teams' need an admin key (and answer as missing).
    if (!p.isAdmin && team.id !== p.teamId) throw new SandtreeError("TEAM_NOT_FOUND", `team ${teamName} not found`);
    return {
      team: team.name,
      limits: this.admission.limits(team.id),
      usage: this.store.teamUsage(team.id, Date.now()),
    };
  }

  setLimits(p: Principal, teamName: string, update: UpdateTeamLimitsRequest): TeamLimitsResponse {
    this.requireAdmin(p, "changing team limits");
    const team = this.teamByName(teamName);
    const overrides: Partial<Record<keyof TeamLimits, number>> = { ...this.store.getTeamLimitOverrides(team.id) };
    for (const [k, v] of Object.entries(update) as Array<[keyof TeamLimits, number | null | undefined]>) {
      if (v === undefined) continue;
      if (v === null || v === DEFAULT_TEAM_LIMITS[k]) delete overrides[k];
      else overrides[k] = v;
    }
    this.store.setTeamLimitOverrides(team.id, overrides);
    return this.getLimits(p, teamName);
  }

  private view(k: ApiKeyRow, team: string): ApiKey {
    return {
      id: k.id,
      team_id: k.team_id,
      team,
      prefix: k.prefix,
      admin: k.is_admin,
      created_at: k.created_at,
      revoked_at: k.revoked_at,
    };
  }
}

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
import type { ApiKeyRow, TeamRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import type { AdmissionService } from "../sandboxes/admission-service.js";
import type { AuthService, Principal } from "./auth-service.js";

/** Teams, API keys and team limits. Everything here needs an admin key, except reading one's own limits. */
export class TeamService {
  constructor(
    private readonly store: Store,
    private readonly auth: AuthService,
    private readonly admission: AdmissionService,
    /** The team's volumes (count, size_gb summed), shown beside its sandboxes' usage. */
    private readonly volumeUsage?: (teamId: string) => Promise<{ count: number; size_gb: number }>,
  ) {}

  private requireAdmin(p: Principal, what: string): void {
    if (!p.isAdmin) throw new SandtreeError("FORBIDDEN", `${what} needs an admin key`);
  }

  private async teamByName(name: string): Promise<TeamRow> {
    const team = await this.store.getTeamByName(name);
    if (!team) throw new SandtreeError("TEAM_NOT_FOUND", `team ${name} not found`, { team: name });
    return team;
  }

  async createTeam(p: Principal, name: string): Promise<Team> {
    this.requireAdmin(p, "creating a team");
    const exists = () => new SandtreeError("ALREADY_EXISTS", `team ${name} already exists`, { team: name });
    if (await this.store.getTeamByName(name)) throw exists();
    try {
      return await this.store.createTeam(name);
    } catch (err) {
      // A concurrent create of the same name won (the name is unique in the store).
      if (await this.store.getTeamByName(name)) throw exists();
      throw err;
    }
  }

  async listTeams(p: Principal): Promise<Team[]> {
    this.requireAdmin(p, "listing teams");
    return await this.store.listTeams();
  }

  async createKey(p: Principal, teamName: string, admin: boolean): Promise<CreatedApiKey> {
    this.requireAdmin(p, "creating an API key");
    const team = await this.teamByName(teamName);
    const { key, row } = await this.auth.issueKey(team.id, admin);
    return { ...this.view(row, team.name), key };
  }

  async listKeys(p: Principal): Promise<ApiKey[]> {
    this.requireAdmin(p, "listing API keys");
    const names = new Map((await this.store.listTeams()).map((t) => [t.id, t.name]));
    return (await this.store.listApiKeys()).map((k) => this.view(k, names.get(k.team_id) ?? k.team_id));
  }

  /** Revoked at once: every request looks its key up, so the next one is refused. */
  async revokeKey(p: Principal, id: string): Promise<ApiKey> {
    this.requireAdmin(p, "revoking an API key");
    // One atomic store call: two revokes of the last two admin keys (on any servers) never both pass.
    const outcome = await this.store.revokeApiKeyKeepingAdmin(id);
    if (outcome === "not_found") throw new SandtreeError("KEY_NOT_FOUND", `API key ${id} not found`, { id });
    if (outcome === "last_admin") {
      throw new SandtreeError("CONFLICT", "this is the last admin key; create another admin key before revoking it", { id });
    }
    const after = await this.store.getApiKey(id);
    if (!after) throw new SandtreeError("KEY_NOT_FOUND", `API key ${id} not found`, { id });
    return this.view(after, (await this.store.getTeam(after.team_id))?.name ?? after.team_id);
  }

  async getLimits(p: Principal, teamName: string): Promise<TeamLimitsResponse> {
    const team = await this.teamByName(teamName);
    // A team may read its own limits; other teams' need an admin key (and answer as missing).
    if (!p.isAdmin && team.id !== p.teamId) throw new SandtreeError("TEAM_NOT_FOUND", `team ${teamName} not found`);
    return {
      team: team.name,
      limits: await this.admission.limits(team.id),
      usage: { ...(await this.store.teamUsage(team.id, Date.now())), ...(await this.volumesOf(team.id)) },
    };
  }

  private async volumesOf(teamId: string): Promise<{ volumes?: number; volume_gb?: number }> {
    if (!this.volumeUsage) return {};
    const u = await this.volumeUsage(teamId);
    return { volumes: u.count, volume_gb: u.size_gb };
  }

  async setLimits(p: Principal, teamName: string, update: UpdateTeamLimitsRequest): Promise<TeamLimitsResponse> {
    this.requireAdmin(p, "changing team limits");
    const team = await this.teamByName(teamName);
    // Read and written in one atomic store call: concurrent updates of different limits (on any
    // servers) keep each other's overrides.
    await this.store.updateTeamLimitOverrides(team.id, (current) => {
      const overrides: Partial<Record<keyof TeamLimits, number>> = { ...current };
      for (const [k, v] of Object.entries(update) as Array<[keyof TeamLimits, number | null | undefined]>) {
        if (v === undefined) continue;
        if (v === null || v === DEFAULT_TEAM_LIMITS[k]) delete overrides[k];
        else overrides[k] = v;
      }
      return overrides;
    });
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

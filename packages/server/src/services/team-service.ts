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

  /** Read-modify-write admin changes (the last admin key, limit overrides) run one at a time. */
  private serial: Promise<unknown> = Promise.resolve();
  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.serial.then(fn, fn);
    this.serial = run.catch(() => {});
    return run;
  }

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
    // Serialized: two revokes of the last two admin keys must not both pass the count.
    return this.serialized(() => this.revokeKeyNow(id));
  }

  private async revokeKeyNow(id: string): Promise<ApiKey> {
    const row = await this.store.getApiKey(id);
    if (!row) throw new SandtreeError("KEY_NOT_FOUND", `API key ${id} not found`, { id });
    if (row.is_admin && !row.revoked_at && (await this.store.countActiveAdminKeys()) <= 1) {
      throw new SandtreeError("CONFLICT", "this is the last admin key; create another admin key before revoking it", { id });
    }
    await this.store.revokeApiKey(id);
    const after = (await this.store.getApiKey(id)) ?? row;
    return this.view(after, (await this.store.getTeam(after.team_id))?.name ?? after.team_id);
  }

  async getLimits(p: Principal, teamName: string): Promise<TeamLimitsResponse> {
    const team = await this.teamByName(teamName);
    // A team may read its own limits; other teams' need an admin key (and answer as missing).
    if (!p.isAdmin && team.id !== p.teamId) throw new SandtreeError("TEAM_NOT_FOUND", `team ${teamName} not found`);
    return {
      team: team.name,
      limits: await this.admission.limits(team.id),
      usage: await this.store.teamUsage(team.id, Date.now()),
    };
  }

  async setLimits(p: Principal, teamName: string, update: UpdateTeamLimitsRequest): Promise<TeamLimitsResponse> {
    this.requireAdmin(p, "changing team limits");
    // Serialized: concurrent updates of different limits must not lose each other's overrides.
    await this.serialized(() => this.applyLimits(teamName, update));
    return this.getLimits(p, teamName);
  }

  private async applyLimits(teamName: string, update: UpdateTeamLimitsRequest): Promise<void> {
    const team = await this.teamByName(teamName);
    const overrides: Partial<Record<keyof TeamLimits, number>> = { ...(await this.store.getTeamLimitOverrides(team.id)) };
    for (const [k, v] of Object.entries(update) as Array<[keyof TeamLimits, number | null | undefined]>) {
      if (v === undefined) continue;
      if (v === null || v === DEFAULT_TEAM_LIMITS[k]) delete overrides[k];
      else overrides[k] = v;
    }
    await this.store.setTeamLimitOverrides(team.id, overrides);
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

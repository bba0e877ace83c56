import { Team, TeamBudget, TeamLimitsResponse, TeamList, type UpdateTeamLimitsRequest } from "@sandtree/protocol";
import type { HttpClient, RequestOptions } from "./http.js";

/** Teams and their quotas (admin keys; a team may read its own limits). */
export class Teams {
  constructor(private readonly http: HttpClient) {}

  create(name: string, options: RequestOptions = {}): Promise<Team> {
    return this.http.json(Team, { ...options, method: "POST", path: "/v1/teams", json: { name } });
  }

  async list(options: RequestOptions = {}): Promise<Team[]> {
    return (await this.http.json(TeamList, { ...options, method: "GET", path: "/v1/teams" })).teams;
  }

  /** The team's limits and current usage. */
  getLimits(team: string, options: RequestOptions = {}): Promise<TeamLimitsResponse> {
    return this.http.json(TeamLimitsResponse, {
      ...options,
      method: "GET",
      path: `/v1/teams/${encodeURIComponent(team)}/limits`,
    });
  }

  /** Changes only the limits given; `null` puts one back to its default. */
  setLimits(team: string, limits: UpdateTeamLimitsRequest, options: RequestOptions = {}): Promise<TeamLimitsResponse> {
    return this.http.json(TeamLimitsResponse, {
      ...options,
      method: "PUT",
      path: `/v1/teams/${encodeURIComponent(team)}/limits`,
      json: limits,
    });
  }

  /** The team's monthly budget (null: none) and its month-to-date cost. */
  getBudget(team: string, options: RequestOptions = {}): Promise<TeamBudget> {
    return this.http.json(TeamBudget, { ...options, method: "GET", path: `/v1/teams/${encodeURIComponent(team)}/budget` });
  }

  /** Sets (admin keys) the team's monthly budget in USD; null removes it. */
  setBudget(team: string, monthlyBudgetUsd: number | null, options: RequestOptions = {}): Promise<TeamBudget> {
    return this.http.json(TeamBudget, {
      ...options,
      method: "PUT",
      path: `/v1/teams/${encodeURIComponent(team)}/budget`,
      json: { monthly_budget_usd: monthlyBudgetUsd },
    });
  }
}

import { StatsQuery, TeamName, UpdateTeamBudgetRequest, UsageQuery } from "@sandtree/protocol";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { parse } from "../errors.js";
import type { UsageScope } from "../services/metering/metering-service.js";
import type { Services } from "../services/services.js";

const TeamParams = z.object({ name: TeamName });

/** A team key sees its team; an admin key sees every team. */
function scopeOf(req: FastifyRequest): UsageScope {
  return req.principal.isAdmin ? { allTeams: true } : { teamId: req.principal.teamId };
}

export function usageRoutes(app: FastifyInstance, s: Services): void {
  app.get("/v1/usage", async (req, reply) => {
    const q = parse(UsageQuery, req.query);
    const report = await s.metering.usage(scopeOf(req), q);
    if (q.format === "csv") {
      const name = `sandtree-usage-${report.from.slice(0, 10)}-${report.to.slice(0, 10)}-by-${report.group_by}.csv`;
      return reply
        .header("content-type", "text/csv; charset=utf-8")
        .header("content-disposition", `attachment; filename="${name}"`)
        .send(s.metering.usageCsv(report));
    }
    return report;
  });

  app.get("/v1/stats", async (req) => s.metering.stats(scopeOf(req), parse(StatsQuery, req.query)));

  app.get("/v1/teams/:name/budget", async (req) => {
    const { name } = parse(TeamParams, req.params);
    return s.metering.budgetOf(req.principal, name);
  });

  app.put("/v1/teams/:name/budget", async (req) => {
    const { name } = parse(TeamParams, req.params);
    return s.metering.setBudget(req.principal, name, parse(UpdateTeamBudgetRequest, req.body).monthly_budget_usd);
  });
}

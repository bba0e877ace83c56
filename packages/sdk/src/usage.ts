import { Stats, type StatsQuery, type UsageQuery, UsageReport } from "@sandtree/protocol";
import type { HttpClient, RequestOptions } from "./http.js";

type Query = Record<string, string | number | undefined>;

function usageQuery(q: Omit<UsageQuery, "format">): Query {
  return { from: q.from, to: q.to, group_by: q.group_by, label_key: q.label_key };
}

/** Metered usage and cost (the key's team; an admin key: every team). */
export class Usage {
  constructor(private readonly http: HttpClient) {}

  /** `GET /v1/usage`: lines per day, hour, label, sandbox or team, and their total. */
  get(query: Omit<UsageQuery, "format"> = {}, options: RequestOptions = {}): Promise<UsageReport> {
    return this.http.json(UsageReport, { ...options, method: "GET", path: "/v1/usage", query: usageQuery(query) });
  }

  /** The same as CSV text (a header, the lines, a `total` row). */
  async csv(query: Omit<UsageQuery, "format"> = {}, options: RequestOptions = {}): Promise<string> {
    const { response, mapError, done } = await this.http.open({
      ...options,
      method: "GET",
      path: "/v1/usage",
      accept: "text/csv",
      query: { ...usageQuery(query), format: "csv" },
    });
    try {
      return await response.text();
    } catch (err) {
      throw mapError(err);
    } finally {
      done();
    }
  }

  /** `GET /v1/stats`: creations, failures, concurrency and cost over a recent window. */
  stats(query: StatsQuery = {}, options: RequestOptions = {}): Promise<Stats> {
    return this.http.json(Stats, {
      ...options,
      method: "GET",
      path: "/v1/stats",
      query: { window_hours: query.window_hours, bucket_minutes: query.bucket_minutes } as Query,
    });
  }
}

import { type PgServer, startPostgres as startCluster } from "../../../scripts/lib/postgres.mjs";

// A real, throwaway PostgreSQL server for tests: the launcher shared with the benches
// (scripts/lib/postgres.mjs: Debian's postgresql-15, a fresh cluster in a temporary directory on a
// free loopback port, as the `postgres` user when run as root). Stop it with stop() (by PID).

export type { PgServer };

/** No durability needed for tests: fsync off makes CREATE DATABASE and commits cheap. */
export function startPostgres(): Promise<PgServer> {
  return startCluster({ durable: false });
}

// Types of postgres.mjs (a throwaway PostgreSQL cluster for tests and benches).

export interface PgServer {
  /** postgres://postgres@127.0.0.1:PORT/NAME */
  url(database: string): string;
  /** Creates an empty database; answers its URL. */
  createDatabase(name: string): Promise<string>;
  dropDatabase(name: string): Promise<void>;
  /**
   * Creates an empty schema in a database; answers a URL whose connections use it
   * (`search_path`): a fresh, isolated store for the price of a CREATE SCHEMA.
   */
  createSchema(database: string, name: string): Promise<string>;
  dropSchema(database: string, name: string): Promise<void>;
  readonly pid: number;
  stop(): Promise<void>;
}

/**
 * Starts a cluster. `durable: true` keeps PostgreSQL's defaults (fsync, synchronous commits and
 * full-page writes on); `durable: false` turns them off, for tests.
 */
export function startPostgres(opts: { durable: boolean }): Promise<PgServer>;

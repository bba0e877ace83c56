import pg from "pg";

// The plumbing every pg-*.ts module shares: a pool whose 64-bit integers and numerics come back as
// JS numbers (the row types hold numbers, as SQLite answers them), query helpers, and a
// transaction wrapper that rolls back on any throw.

/** A pool or one checked-out client: both run queries. */
export type Db = Pick<pg.PoolClient, "query">;

const INT8 = 20;
const NUMERIC = 1700;

/** bigint (counts, sums, millisecond times, byte sizes) and numeric as numbers, like SQLite. */
function getTypeParser(oid: number, format?: "text" | "binary"): (value: string) => unknown {
  if (oid === INT8 || oid === NUMERIC) return (v: string) => Number(v);
  return pg.types.getTypeParser(oid, format ?? "text") as (value: string) => unknown;
}

export function createPool(connectionString: string, max = 10, connectTimeoutMs = 30_000): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    // A database that does not answer fails the start (or the request) instead of hanging.
    connectionTimeoutMillis: connectTimeoutMs,
    types: { getTypeParser } as pg.CustomTypesConfig,
  });
  // An idle client whose connection dies must not crash the server: the next query reconnects.
  pool.on("error", () => {});
  return pool;
}

export async function all<T>(db: Db, sql: string, params: readonly unknown[] = []): Promise<T[]> {
  return (await db.query(sql, params as unknown[])).rows as T[];
}

export async function one<T>(db: Db, sql: string, params: readonly unknown[] = []): Promise<T | undefined> {
  return (await db.query(sql, params as unknown[])).rows[0] as T | undefined;
}

/** Rows changed by an INSERT, UPDATE or DELETE. */
export async function run(db: Db, sql: string, params: readonly unknown[] = []): Promise<number> {
  return (await db.query(sql, params as unknown[])).rowCount ?? 0;
}

/** Runs `fn` in one transaction on one client: committed when it resolves, rolled back when it throws. */
export async function tx<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query("BEGIN");
    const out = await fn(c);
    await c.query("COMMIT");
    return out;
  } catch (err) {
    await c.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    c.release();
  }
}

/** Columns may only be names (patch keys come from code, but never interpolate anything else). */
function column(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a column name: ${name}`);
  return name;
}

/** `INSERT INTO table (a, b) VALUES ($1, $2)` and its values, from a row's columns. */
export function insertSql(table: string, row: Record<string, unknown>, columns: readonly string[]): [string, unknown[]] {
  const values = columns.map((c) => row[c] ?? null);
  const marks = columns.map((_, i) => `$${i + 1}`);
  return [`INSERT INTO ${table} (${columns.map(column).join(", ")}) VALUES (${marks.join(", ")})`, values];
}

/** A table read and written whole: `select` (its columns, no WHERE yet) and `insert` of a row of them. */
export function wholeRows<Row extends object>(table: string, columns: readonly (keyof Row & string)[]) {
  return {
    select: `SELECT ${columns.join(", ")} FROM ${table}`,
    insert: async (db: Db, row: Row): Promise<void> => {
      await run(db, ...insertSql(table, row as Record<string, unknown>, columns));
    },
  };
}

/**
 * `UPDATE table SET ... WHERE id = $n [AND statusCol IN (...)]` and its values: the conditional
 * update every status change uses, so concurrent writers cannot overwrite each other's transitions.
 */
export function updateSql(
  table: string,
  fields: Record<string, unknown>,
  id: string,
  cond?: { column: string; from: readonly string[] },
): [string, unknown[]] {
  const keys = Object.keys(fields);
  const values: unknown[] = keys.map((k) => fields[k] ?? null);
  const sets = keys.map((k, i) => `${column(k)} = $${i + 1}`);
  values.push(id);
  let sql = `UPDATE ${table} SET ${sets.join(", ")} WHERE id = $${values.length}`;
  if (cond && cond.from.length > 0) {
    values.push([...cond.from]);
    sql += ` AND ${column(cond.column)} = ANY($${values.length})`;
  }
  return [sql, values];
}

// Statement pieces the SQLite store's files share (PostgreSQL's are in pg-db.ts).

/** A WHERE for SQLite built one condition at a time, each with the values of its `?`s, in order. */
export class SqliteWhere {
  private readonly conditions: string[] = [];
  readonly params: unknown[] = [];

  /** Adds `condition`, whose `?`s stand for `values`. */
  and(condition: string, ...values: unknown[]): this {
    this.conditions.push(condition);
    this.params.push(...values);
    return this;
  }

  /** Adds `column IN (...)` of `values`. */
  in(column: string, values: readonly unknown[]): this {
    return this.and(`${column} IN (${values.map(() => "?").join(",")})`, ...values);
  }

  /** `WHERE a AND b`, or nothing without a condition. */
  get sql(): string {
    return this.conditions.length ? `WHERE ${this.conditions.join(" AND ")}` : "";
  }
}

/**
 * `UPDATE table SET ... WHERE id = @__id [AND column IN (...)]` and its named parameters: the
 * conditional update a state change uses, so a transition applies only from the states it names.
 */
export function sqliteUpdate(
  table: string,
  fields: Record<string, unknown>,
  id: string,
  cond?: { column: string; from: readonly string[] },
): { sql: string; params: Record<string, unknown> } {
  const sets = Object.keys(fields).map((k) => `${k} = @${k}`);
  let sql = `UPDATE ${table} SET ${sets.join(", ")} WHERE id = @__id`;
  const params: Record<string, unknown> = { ...fields, __id: id };
  if (cond && cond.from.length > 0) {
    sql += ` AND ${cond.column} IN (${cond.from.map((_, i) => `@__from${i}`).join(",")})`;
    cond.from.forEach((s, i) => {
      params[`__from${i}`] = s;
    });
  }
  return { sql, params };
}

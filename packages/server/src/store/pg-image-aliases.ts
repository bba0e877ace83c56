import type pg from "pg";
import type { ImageAliasRow, ImageAliasStore } from "./image-aliases.js";
import { all, one, run } from "./pg-db.js";

/** The image alias table on PostgreSQL (see image-aliases.ts). */
export class PgImageAliases implements ImageAliasStore {
  constructor(private readonly pool: pg.Pool) {}

  listImageAliases(): Promise<ImageAliasRow[]> {
    return all<ImageAliasRow>(this.pool, "SELECT * FROM image_aliases ORDER BY name");
  }

  getImageAlias(name: string): Promise<ImageAliasRow | undefined> {
    return one<ImageAliasRow>(this.pool, "SELECT * FROM image_aliases WHERE name = $1", [name]);
  }

  async setImageAlias(name: string, target: string): Promise<ImageAliasRow> {
    const row = await one<ImageAliasRow>(
      this.pool,
      `INSERT INTO image_aliases (name, target, created_at, updated_at) VALUES ($1, $2, $3, $3)
       ON CONFLICT (name) DO UPDATE SET target = excluded.target, updated_at = excluded.updated_at RETURNING *`,
      [name, target, new Date().toISOString()],
    );
    return row as ImageAliasRow;
  }

  async deleteImageAlias(name: string): Promise<boolean> {
    return (await run(this.pool, "DELETE FROM image_aliases WHERE name = $1", [name])) > 0;
  }
}

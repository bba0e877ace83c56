import type Database from "better-sqlite3";
import type { ImageAliasRow, ImageAliasStore } from "./image-aliases.js";

/** The image alias table on SQLite (see image-aliases.ts). */
export class SqliteImageAliases implements ImageAliasStore {
  constructor(private readonly db: Database.Database) {}

  async listImageAliases(): Promise<ImageAliasRow[]> {
    return this.db.prepare("SELECT * FROM image_aliases ORDER BY name").all() as ImageAliasRow[];
  }

  async getImageAlias(name: string): Promise<ImageAliasRow | undefined> {
    return this.db.prepare("SELECT * FROM image_aliases WHERE name = ?").get(name) as ImageAliasRow | undefined;
  }

  async setImageAlias(name: string, target: string): Promise<ImageAliasRow> {
    const now = new Date().toISOString();
    this.db
      .prepare(
        `INSERT INTO image_aliases (name, target, created_at, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET target = excluded.target, updated_at = excluded.updated_at`,
      )
      .run(name, target, now, now);
    return (await this.getImageAlias(name)) as ImageAliasRow;
  }

  async deleteImageAlias(name: string): Promise<boolean> {
    return this.db.prepare("DELETE FROM image_aliases WHERE name = ?").run(name).changes > 0;
  }
}

/**
 * The admin-set image alias table (table `image_aliases`): a name users' code gives
 * (`python:3.11-slim`, E2B's `base`) mapped to an image this host has or can pull
 * (`sandtree/debian`), for hosts without a registry and for tests. Names and targets are stored as
 * the image service normalizes them (image-aliases service).
 */
export interface ImageAliasRow {
  name: string;
  target: string;
  created_at: string;
  updated_at: string;
}

export interface ImageAliasStore {
  listImageAliases(): Promise<ImageAliasRow[]>;
  getImageAlias(name: string): Promise<ImageAliasRow | undefined>;
  /** Sets or replaces the alias (keeping its created_at); answers the stored row. */
  setImageAlias(name: string, target: string): Promise<ImageAliasRow>;
  /** False when there was no such alias. */
  deleteImageAlias(name: string): Promise<boolean>;
}

export const IMAGE_ALIASES_MIGRATION = `
  CREATE TABLE image_aliases (name TEXT PRIMARY KEY, target TEXT NOT NULL, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL);`;

export const PG_IMAGE_ALIASES_MIGRATION = `
  CREATE TABLE image_aliases (name TEXT COLLATE "C" PRIMARY KEY, target TEXT NOT NULL, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL);`;

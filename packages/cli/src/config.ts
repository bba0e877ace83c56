import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";

export const DEFAULT_API_URL = "http://127.0.0.1:7070";

export type Env = Record<string, string | undefined>;

export interface GlobalFlags {
  apiUrl?: string;
  apiKey?: string;
}

export interface CliConfig {
  apiUrl: string;
  apiKey: string;
}

/** SANDTREE_DATA_DIR, else ${XDG_DATA_HOME:-~/.local/share}/sandtree. */
export function defaultDataDir(env: Env, home = homedir()): string {
  if (env.SANDTREE_DATA_DIR) return env.SANDTREE_DATA_DIR;
  const base = env.XDG_DATA_HOME || join(env.HOME || home, ".local", "share");
  return join(base, "sandtree");
}

/** Reads `export KEY=value` / `KEY="value"` lines; ignores comments and anything else. */
export function parseCredentials(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split(/\r?\n/)) {
    const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(raw);
    if (!m?.[1]) continue;
    let value = (m[2] ?? "").trim();
    const q = value[0];
    if ((q === '"' || q === "'") && value.length >= 2 && value.endsWith(q)) value = value.slice(1, -1);
    out[m[1]] = value;
  }
  return out;
}

/**
 * Key: --api-key, then SANDTREE_API_KEY, then <data-dir>/credentials.env.
 * URL: --api-url, then SANDTREE_API_URL, then credentials.env (where the local server said it listens), then the default.
 * The file is only read when the flags and environment leave something unset.
 */
export async function resolveCliConfig(flags: GlobalFlags, env: Env): Promise<CliConfig> {
  let apiUrl = flags.apiUrl || env.SANDTREE_API_URL;
  let apiKey = flags.apiKey || env.SANDTREE_API_KEY;
  const file = join(defaultDataDir(env), "credentials.env");
  if (!apiKey || !apiUrl) {
    let text: string | undefined;
    try {
      text = await readFile(file, "utf8");
    } catch {
      text = undefined;
    }
    const creds = text === undefined ? {} : parseCredentials(text);
    apiKey ||= creds.SANDTREE_API_KEY;
    apiUrl ||= creds.SANDTREE_API_URL;
  }
  if (!apiKey) {
    throw Object.assign(
      new Error(
        `no API key: pass --api-key, set SANDTREE_API_KEY, or start a server with \`sandtree serve\` (it writes ${file})`,
      ),
      { code: "MISSING_API_KEY" },
    );
  }
  return { apiUrl: apiUrl || DEFAULT_API_URL, apiKey };
}

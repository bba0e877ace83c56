import { z } from "zod";

/** `GET /v1/version`: the server's version (one version for the whole project). */
export const ServerVersion = z.object({ version: z.string() });
export type ServerVersion = z.infer<typeof ServerVersion>;

/**
 * The sandtree version a User-Agent names (`sandtree-sdk/0.2.0 node/20.1.0`,
 * `sandtree-cli/0.2.0 sandtree-sdk/0.2.0 ...`): the first `sandtree-*` product token, or null.
 */
export function clientVersionOf(userAgent: string | undefined): string | null {
  const m = userAgent ? /(?:^|\s)sandtree-[a-z]+\/(\d+\.\d+\.\d+[^\s]*)/.exec(userAgent) : null;
  return m?.[1] ?? null;
}

/** Compares two `X.Y.Z` versions (a pre-release `-suffix` sorts before its release); <0, 0, >0. */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string) => {
    const [core = "", pre] = v.split("-", 2);
    return { nums: core.split(".").map((n) => Number.parseInt(n, 10) || 0), pre };
  };
  const x = parse(a);
  const y = parse(b);
  for (let i = 0; i < 3; i++) {
    const d = (x.nums[i] ?? 0) - (y.nums[i] ?? 0);
    if (d !== 0) return d;
  }
  if (x.pre === y.pre) return 0;
  if (x.pre === undefined) return 1;
  if (y.pre === undefined) return -1;
  return x.pre < y.pre ? -1 : 1;
}

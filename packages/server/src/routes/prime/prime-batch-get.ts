import { SandtreeError } from "@sandtree/protocol";

/**
 * Prime's batchGet: `get` for each id in order; the answers, and the ids whose lookup was a 404
 * (with its error). Any other error fails the whole call.
 */
export async function getEach<T>(
  ids: readonly string[],
  get: (id: string) => Promise<T>,
): Promise<{ found: T[]; missing: Array<{ id: string; err: SandtreeError }> }> {
  const found: T[] = [];
  const missing: Array<{ id: string; err: SandtreeError }> = [];
  for (const id of ids) {
    try {
      found.push(await get(id));
    } catch (err) {
      if (!(err instanceof SandtreeError) || err.status !== 404) throw err;
      missing.push({ id, err });
    }
  }
  return { found, missing };
}

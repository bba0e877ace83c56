/** What a refused call threw (an ApiError's fields), for the fleet's unit tests; throws when `f` was not refused. */
export function refusal(f: () => unknown): { code: string; status: number; message: string; details: Record<string, any> } {
  try {
    f();
  } catch (err) {
    return err as { code: string; status: number; message: string; details: Record<string, any> };
  }
  throw new Error("not refused");
}

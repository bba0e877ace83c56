import { type DesktopEvent, type DesktopReplayReport, type DesktopReplayStep, SandtreeError } from "@sandtree/protocol";
import type { DesktopService } from "./desktop-service.js";
import { decodePng, diffRatio } from "./png-diff.js";

export interface ReplayOptions {
  /** The recorded sandbox, to read the reference screenshots from (none: exact hashes only). */
  sourceId?: string | undefined;
  channelTolerance: number;
  maxDiffRatio: number;
  stopOnMismatch: boolean;
}

/**
 * Replays recorded events into a sandbox, action by action, and compares each action's screen
 * afterwards with the recorded one: the exact sha256 of the PNG, else (given the reference
 * image) the fraction of pixels that differ beyond a per-channel tolerance.
 */
export async function replayEvents(
  desktop: DesktopService,
  teamId: string,
  targetId: string,
  events: DesktopEvent[],
  opts: ReplayOptions,
): Promise<DesktopReplayReport> {
  if (opts.sourceId === targetId) {
    throw new SandtreeError("VALIDATION_FAILED", "source_sandbox_id: replay into another sandbox (a fresh one or a fork)", {
      field: "source_sandbox_id",
    });
  }
  const steps: DesktopReplayStep[] = [];
  for (const recorded of [...events].sort((a, b) => a.seq - b.seq)) {
    let event: DesktopEvent;
    try {
      event = await desktop.act(teamId, targetId, recorded.action, { check: false });
    } catch (err) {
      const failed = err instanceof SandtreeError ? (err.details?.event as DesktopEvent | undefined) : undefined;
      if (!failed) throw err;
      event = failed;
    }
    const expected = recorded.screen_after.sha256;
    const actual = event.screen_after.sha256;
    const exact = expected === actual;
    let ratio: number | null = exact ? 0 : null;
    if (!exact && opts.sourceId) {
      const [want, got] = await Promise.all([
        desktop.screenshot(teamId, opts.sourceId, expected),
        desktop.screenshot(teamId, targetId, actual),
      ]);
      ratio = diffRatio(decodePng(want), decodePng(got), opts.channelTolerance);
    }
    const ok = event.ok === recorded.ok;
    const match = ok && (exact || (ratio !== null && ratio <= opts.maxDiffRatio));
    steps.push({
      seq: recorded.seq,
      type: recorded.action.type,
      ok,
      expected_sha256: expected,
      actual_sha256: actual,
      exact,
      diff_ratio: ratio,
      match,
    });
    if (!match && opts.stopOnMismatch) break;
  }
  const matched = steps.filter((s) => s.match).length;
  return { sandbox_id: targetId, total: steps.length, matched, all_match: matched === events.length, steps };
}

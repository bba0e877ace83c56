import {
  type BatchStatusResult,
  type BulkDeleteResult,
  type Sandbox,
  type SandboxStatus,
  TERMINAL_STATUSES,
} from "@sandtree/protocol";
import type { Store } from "../../store/store.js";
import type { Logger } from "../observability/logger.js";
import type { SandboxService } from "./sandbox-service.js";

/** Teardowns run at the same time by one bulk delete. */
const DELETE_CONCURRENCY = 8;

export class BulkService {
  constructor(
    private readonly store: Store,
    private readonly sandboxes: SandboxService,
    private readonly log: Logger,
  ) {}

  /**
   * Deletes the given sandboxes of the team (already ended ones count as deleted: delete is
   * idempotent), or every not yet ended sandbox carrying all of `labels`.
   */
  async delete(teamId: string, req: { ids?: string[] | undefined; labels?: Record<string, string> | undefined }) {
    const result: BulkDeleteResult = { deleted: [], not_found: [] };
    if (req.ids) {
      for (const id of new Set(req.ids)) {
        if (await this.store.getSandbox(id, teamId)) result.deleted.push(id);
        else result.not_found.push(id);
      }
    } else {
      result.deleted = (await this.matching(teamId, req.labels ?? {})).map((s) => s.id);
    }
    const queue = [...result.deleted];
    const worker = async () => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        await this.sandboxes.delete(teamId, id).catch((err) => this.log.warn({ err, sandbox: id }, "bulk delete failed"));
      }
    };
    await Promise.all(Array.from({ length: Math.min(DELETE_CONCURRENCY, queue.length) }, worker));
    return result;
  }

  private async matching(teamId: string, labels: Record<string, string>): Promise<Sandbox[]> {
    const out: Sandbox[] = [];
    let beforeSeq: number | undefined;
    for (;;) {
      const page = await this.store.listSandboxes(teamId, {
        labels,
        limit: 1000,
        ...(beforeSeq !== undefined ? { beforeSeq } : {}),
      });
      out.push(...page.sandboxes.filter((s) => !TERMINAL_STATUSES.includes(s.status)));
      if (page.lastSeq === null) return out;
      beforeSeq = page.lastSeq;
    }
  }

  async batchStatus(teamId: string, ids: string[]): Promise<BatchStatusResult> {
    const result: BatchStatusResult = { sandboxes: [], not_found: [] };
    for (const id of new Set(ids)) {
      const sb = await this.store.getSandbox(id, teamId);
      if (sb) result.sandboxes.push({ id, status: sb.status as SandboxStatus, error_reason: sb.error_reason });
      else result.not_found.push(id);
    }
    return result;
  }
}

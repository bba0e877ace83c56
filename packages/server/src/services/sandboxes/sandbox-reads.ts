import { readFileSync } from "node:fs";
import path from "node:path";
import { tailOfFile } from "@sandtree/host";
import { SandtreeError } from "@sandtree/protocol";
import type { SandboxFilter } from "../../store/rows.js";
import type { Store } from "../../store/store.js";

/** One page of a team's sandboxes, newest first; the cursor is the last row's sequence number. */
export async function listPage(store: Store, teamId: string, q: Omit<SandboxFilter, "beforeSeq"> & { cursor?: string }) {
  const { cursor, ...filter } = q;
  const beforeSeq = cursor === undefined ? undefined : Number.parseInt(Buffer.from(cursor, "base64url").toString("utf8"), 10);
  if (beforeSeq !== undefined && !Number.isSafeInteger(beforeSeq))
    throw new SandtreeError("VALIDATION_FAILED", "invalid cursor", { field: "cursor" });
  const page = await store.listSandboxes(teamId, { ...filter, ...(beforeSeq !== undefined ? { beforeSeq } : {}) });
  const next_cursor = page.lastSeq === null ? null : Buffer.from(String(page.lastSeq)).toString("base64url");
  return { sandboxes: page.sandboxes, next_cursor };
}

/** The tail of a sandbox's console log and its last events. */
export async function sandboxLogs(store: Store, logDir: string, id: string, tailBytes: number) {
  const file = path.join(logDir, "console.log");
  const text = tailOfFile(file, tailBytes);
  let size = 0;
  try {
    size = readFileSync(file).length;
  } catch {}
  return {
    sandbox_id: id,
    console: text,
    console_truncated: size > tailBytes,
    events: await store.listEvents(id, 500),
  };
}

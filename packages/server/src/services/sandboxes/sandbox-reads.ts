import type { MachineHost } from "@sandtree/host";
import { SandtreeError } from "@sandtree/protocol";
import type { SandboxFilter } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import { machineNameOf } from "./sandbox-paths.js";

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

/** The tail of a sandbox's console log (read by the host its machine ran on: the log outlives it) and its last events. */
export async function sandboxLogs(store: Store, host: MachineHost, id: string, tailBytes: number) {
  const tail = await host.consoleTail(machineNameOf(id), tailBytes);
  return {
    sandbox_id: id,
    console: tail.text,
    console_truncated: tail.size > tailBytes,
    events: await store.listEvents(id, 500),
  };
}

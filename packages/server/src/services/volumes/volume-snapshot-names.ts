import { randomBytes } from "node:crypto";

/** The label a snapshot carries: the id of the volume it was taken of. */
export const SNAPSHOT_OF_LABEL = "sandtree/snapshot-of";

/** A snapshot's name: its source's, `-snap-` and 6 hex digits (within the 63 a name may have). */
export function snapshotName(source: string): string {
  return `${source.slice(0, 52)}-snap-${randomBytes(3).toString("hex")}`;
}

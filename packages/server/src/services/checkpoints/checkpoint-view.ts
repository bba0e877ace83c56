import type { Checkpoint } from "@sandtree/protocol";
import type { CheckpointRow } from "../../store/rows.js";

/** What the public API shows of a checkpoint row. */
export function publicCheckpoint(r: CheckpointRow): Checkpoint {
  const {
    image_digest: _d,
    base: _b,
    sha256: _s,
    blob_key: _k,
    mem_key: _m,
    mem_sha256: _ms,
    cpu_cores: _c,
    memory_mb,
    ...pub
  } = r;
  return { ...pub, has_memory: memory_mb !== null, machine: memory_mb !== null ? (pub.machine ?? null) : null };
}

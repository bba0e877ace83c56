// A sandbox row for benches that seed a store directly (insertSandbox): one that ended at `at`.

/** A busybox sandbox of `teamId` created, started and ended at `at`, with `over` on top. */
export function endedSandboxRow(teamId, at, over) {
  return {
    name: null,
    team_id: teamId,
    image: "sandtree/busybox",
    image_digest: null,
    status: "TERMINATED",
    cpu_cores: 1,
    memory_gb: 0.25,
    disk_size_gb: 1,
    environment_vars: {},
    labels: {},
    start_command: null,
    accel: null,
    error_reason: null,
    created_at: at,
    updated_at: at,
    started_at: at,
    terminated_at: at,
    ...over,
  };
}

import type { Accel } from "@sandtree/host";
import type { CreateSandboxParams, Sandbox } from "@sandtree/protocol";
import { lifetimeFields } from "./lifetime.js";

/** A create's row before admission: PENDING, as the request asked, on this server's accelerator. */
export function pendingSandbox(id: string, teamId: string, image: string, params: CreateSandboxParams, accel: Accel): Sandbox {
  const now = new Date().toISOString();
  return {
    id,
    name: params.name ?? null,
    team_id: teamId,
    image,
    image_digest: null,
    status: "PENDING",
    cpu_cores: params.cpu_cores,
    memory_gb: params.memory_gb,
    disk_size_gb: params.disk_size_gb,
    environment_vars: params.environment_vars,
    labels: params.labels,
    start_command: params.start_command ?? null,
    display: params.display ? `${params.display.width}x${params.display.height}` : null,
    nested_virtualization: params.nested_virtualization,
    accel,
    error_reason: null,
    error_code: null,
    created_at: now,
    updated_at: now,
    started_at: null,
    terminated_at: null,
    ...lifetimeFields(params, now),
  };
}

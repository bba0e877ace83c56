import { type PrimeCreateSandboxRequest, SandtreeError } from "@sandtree/protocol";
import type { Principal } from "../../services/teams/auth-service.js";
import { labelsFromPrime, startCommandLine } from "./prime-views.js";

function refuse(field: string, why: string): never {
  throw new SandtreeError("VALIDATION_FAILED", `${field}: ${why}`, { field });
}

function whole(field: string, v: number): number {
  if (!Number.isInteger(v)) refuse(field, `sandtree takes whole numbers here (got ${v})`);
  return v;
}

/** A Prime `team_id` names the key's own team or nothing: a key acts for its team only. */
export function checkTeam(p: Principal, teamId: string | undefined): void {
  if (teamId !== undefined && teamId !== p.teamId) {
    throw new SandtreeError("FORBIDDEN", `team_id ${teamId}: this API key acts for team ${p.teamId} only`, { field: "team_id" });
  }
}

/**
 * A Prime create request as sandtree's (POST /v1/sandboxes): the same fields where they exist;
 * what sandtree cannot do (GPUs, regions, arm64, volumes, advanced configs) is refused.
 */
export function nativeCreateBody(p: Principal, r: PrimeCreateSandboxRequest): Record<string, unknown> {
  checkTeam(p, r.team_id);
  if (r.gpu_count > 0 || r.gpu_type !== undefined) refuse("gpu_count", "sandtree sandboxes have no GPUs");
  if (r.region !== undefined) refuse("region", "a sandtree server has no regions");
  if (r.arch === "arm64") refuse("arch", "sandtree runs amd64 guests only");
  if (r.volumes !== undefined && r.volumes.length > 0) refuse("volumes", "Prime volumes are not served by sandtree");
  if (r.advanced_configs !== undefined && Object.keys(r.advanced_configs).length > 0) {
    refuse("advanced_configs", "sandtree knows no advanced configs");
  }
  if (r.checkpoint_id === undefined && r.docker_image === undefined) refuse("docker_image", "give docker_image or checkpoint_id");
  if (r.checkpoint_id !== undefined && (r.docker_image !== undefined || r.disk_size_gb !== undefined)) {
    refuse("checkpoint_id", "omit docker_image and disk_size_gb when restoring a checkpoint");
  }
  const body: Record<string, unknown> = {
    name: r.name,
    cpu_cores: whole("cpu_cores", r.cpu_cores),
    memory_gb: r.memory_gb,
    timeout_minutes: r.timeout_minutes < 0 ? -1 : r.timeout_minutes,
    labels: labelsFromPrime(r.labels),
  };
  if (r.timeout_minutes === 0) refuse("timeout_minutes", "0 is not a lifetime: use -1 for none");
  if (r.checkpoint_id !== undefined) body.checkpoint_id = r.checkpoint_id;
  if (r.docker_image !== undefined) body.image = r.docker_image;
  if (r.disk_size_gb !== undefined) body.disk_size_gb = whole("disk_size_gb", r.disk_size_gb);
  if (r.start_command !== undefined) {
    body.start_command = typeof r.start_command === "string" ? r.start_command : startCommandLine(r.start_command);
  }
  if (r.idle_timeout_minutes !== undefined) body.idle_timeout_minutes = r.idle_timeout_minutes;
  if (r.environment_vars !== undefined) body.environment_vars = r.environment_vars;
  if (r.secrets !== undefined) body.secrets = r.secrets;
  if (r.network_allowlist !== undefined) body.network_allowlist = r.network_allowlist;
  if (r.network_denylist !== undefined) body.network_denylist = r.network_denylist;
  if (r.idempotency_key !== undefined) body.idempotency_key = r.idempotency_key;
  return body;
}

import type { Checkpoint, Sandbox } from "@sandtree/protocol";
import { SandtreeError } from "@sandtree/protocol";

// sandtree's resources as the Prime Sandboxes client reads them (its `models.py`): camelCase
// sandboxes, snake_case checkpoints, labels as strings.

const LABEL_KEY = /^[A-Za-z0-9][A-Za-z0-9._\-/]{0,62}$/;

/** A Prime label (a string) as a sandtree label: `key` is `{key: ""}`, `key=value` is `{key: value}`. */
export function labelsFromPrime(labels: readonly string[], field = "labels"): Record<string, string> {
  const out: Record<string, string> = {};
  for (const label of labels) {
    const eq = label.indexOf("=");
    const key = eq < 0 ? label : label.slice(0, eq);
    if (!LABEL_KEY.test(key)) {
      throw new SandtreeError(
        "VALIDATION_FAILED",
        `${field}: ${JSON.stringify(label)} is not a sandtree label (1-63 letters, digits, '.', '_', '-', '/', optionally =value)`,
        { field },
      );
    }
    out[key] = eq < 0 ? "" : label.slice(eq + 1);
  }
  return out;
}

export function labelsToPrime(labels: Record<string, string>): string[] {
  return Object.entries(labels).map(([k, v]) => (v === "" ? k : `${k}=${v}`));
}

/** POSIX shell quoting of one word. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_./=:@%+-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** A Prime start command (no shell: executable and args) as sandtree's (a shell line). */
export function startCommandLine(c: { executable: string; args: string[] }): string {
  return `exec ${[c.executable, ...c.args].map(shellQuote).join(" ")}`;
}

/** Splits a line startCommandLine wrote back into its words; null for any other line. */
function parseExecLine(line: string): string[] | null {
  if (!line.startsWith("exec ")) return null;
  const words: string[] = [];
  const re = /\s*(?:([A-Za-z0-9_./=:@%+-]+)|'((?:[^']|'\\'')*)')(?=\s|$)/y;
  let at = 5;
  while (at < line.length) {
    re.lastIndex = at;
    const m = re.exec(line);
    if (!m) return null;
    words.push(m[1] ?? (m[2] ?? "").replace(/'\\''/g, "'"));
    at = re.lastIndex;
  }
  return words.length > 0 ? words : null;
}

function startCommandView(line: string | null): { executable: string; args: string[] } | null {
  if (line === null) return null;
  const words = parseExecLine(line);
  if (words) return { executable: words[0] as string, args: words.slice(1) };
  return { executable: "/bin/sh", args: ["-c", line] };
}

/** Prime's errorType for an ended sandbox: the kinds its client turns into exceptions, else a generic one. */
export function errorTypeOf(sb: Pick<Sandbox, "status" | "error_reason" | "started_at">): string | null {
  if (sb.status === "TIMEOUT") return "TIMEOUT";
  if (sb.status !== "ERROR") return null;
  const reason = sb.error_reason ?? "";
  if (/out of memory|\boom\b/i.test(reason)) return "OOM_KILLED";
  if (sb.started_at === null && /image|registry|manifest|pull/i.test(reason)) return "IMAGE_PULL_FAILED";
  return "SANDBOX_ERROR";
}

export function sandboxView(sb: Sandbox, net?: { allowlist: string[] | null; denylist: string[] | null }) {
  return {
    id: sb.id,
    name: sb.name ?? sb.id,
    dockerImage: sb.image,
    startCommand: startCommandView(sb.start_command),
    cpuCores: sb.cpu_cores,
    memoryGB: sb.memory_gb,
    diskSizeGB: sb.disk_size_gb,
    diskMountPath: "/",
    gpuCount: 0,
    gpuType: null,
    vm: true,
    networkAllowlist: net?.allowlist ?? null,
    networkDenylist: net?.denylist ?? null,
    status: sb.status,
    timeoutMinutes: sb.timeout_minutes == null ? -1 : Math.round(sb.timeout_minutes),
    idleTimeoutMinutes: sb.idle_timeout_minutes == null ? null : Math.ceil(sb.idle_timeout_minutes),
    terminationReason: sb.status === "TERMINATED" || sb.status === "TIMEOUT" ? sb.error_reason : null,
    environmentVars: sb.environment_vars,
    secrets: sb.secrets ?? null,
    advancedConfigs: null,
    labels: labelsToPrime(sb.labels),
    createdAt: sb.created_at,
    updatedAt: sb.updated_at,
    startedAt: sb.started_at,
    terminatedAt: sb.terminated_at,
    exitCode: null,
    errorType: errorTypeOf(sb),
    errorMessage: sb.status === "ERROR" || sb.status === "TIMEOUT" ? sb.error_reason : null,
    userId: null,
    teamId: sb.team_id,
    region: null,
    pendingImageBuildId: null,
  };
}

export function statusView(sb: Sandbox) {
  return {
    sandbox_id: sb.id,
    status: sb.status,
    error_type: errorTypeOf(sb),
    error_message: sb.status === "ERROR" || sb.status === "TIMEOUT" ? sb.error_reason : null,
    pending_image_build_id: null,
  };
}

/** A checkpoint as Prime's `SandboxCheckpoint` (the same states: PENDING, FROZEN, DURABLE, FAILED, DELETING). */
export function checkpointView(c: Checkpoint) {
  return {
    id: c.id,
    sandbox_id: c.sandbox_id,
    parent_id: c.parent_id,
    team_id: c.team_id,
    state: c.state,
    depth: c.depth,
    docker_image: c.image,
    disk_size_bytes: c.disk_size_bytes,
    stored_bytes: c.stored_bytes,
    occupied_bytes: c.stored_bytes,
    error: c.error,
    created_at: c.created_at,
    updated_at: c.updated_at,
  };
}

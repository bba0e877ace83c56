import { PrimeJobsBatchRequest, SandtreeError } from "@sandtree/protocol";
import type { FastifyInstance } from "fastify";
import { parse } from "../../errors.js";
import type { Services } from "../../services/services.js";

// Prime's background jobs are the client's own: a `nohup` wrapper it runs through the command
// session, leaving /tmp/job_<id>.exit (the exit code), /tmp/job_<id>.launch/pid and the output
// logs. The batch status route reads that state for many jobs in one exec per sandbox, the
// same checks the client makes one job at a time.

const JOB_ID = /^[0-9a-f]{8}$/i;

type Status = { sandbox_id: string; job_id: string; completed: boolean; exit_code: number | null };
type Failure = { sandbox_id: string; job_id: string; code: string; message: string };

/** One line per job: `<id> exit <code>`, `<id> running`, `<id> missing` or `<id> lost`. */
function statusScript(ids: string[]): string {
  return `for j in ${ids.join(" ")}; do
  e=/tmp/job_$j.exit
  if grep -qs . "$e"; then echo "$j exit $(head -n 1 "$e")"; continue; fi
  if [ ! -d "/tmp/job_$j.launch" ]; then echo "$j missing"; continue; fi
  if grep -qsF "$e" "/proc/$(cat "/tmp/job_$j.launch/pid" 2>/dev/null)/cmdline" 2>/dev/null; then echo "$j running"; continue; fi
  if grep -qs . "$e"; then echo "$j exit $(head -n 1 "$e")"; else echo "$j lost"; fi
done`;
}

async function sandboxJobs(s: Services, teamId: string, sandboxId: string, ids: string[]): Promise<Array<Status | Failure>> {
  const fail = (job_id: string, code: string, message: string): Failure => ({ sandbox_id: sandboxId, job_id, code, message });
  let sb: Awaited<ReturnType<Services["sandboxes"]["get"]>>;
  try {
    sb = await s.sandboxes.get(teamId, sandboxId);
  } catch (err) {
    if (err instanceof SandtreeError && err.status === 404)
      return ids.map((j) => fail(j, "NOT_FOUND", `sandbox ${sandboxId} not found`));
    throw err;
  }
  if (sb.status !== "RUNNING") {
    return ids.map((j) => fail(j, "NOT_RUNNING", `sandbox ${sandboxId} is ${sb.status}`));
  }
  const valid = ids.filter((j) => JOB_ID.test(j));
  const out = new Map<string, Status | Failure>();
  for (const j of ids) if (!JOB_ID.test(j)) out.set(j, fail(j, "NOT_FOUND", `${j} is not a background job id (8 hex digits)`));
  if (valid.length > 0) {
    try {
      const r = await s.exec.runBuffered(teamId, sandboxId, {
        command: ["/bin/sh", "-c", statusScript(valid)],
        env: {},
        stdin_open: false,
        timeout_seconds: 30,
      });
      if (r.exit_code !== 0) throw new SandtreeError("GUEST_ERROR", `the status check exited ${r.exit_code}: ${r.stderr.trim()}`);
      for (const line of r.stdout.split("\n")) {
        const [j = "", what, code] = line.trim().split(/\s+/);
        if (!valid.includes(j)) continue;
        if (what === "exit" && code !== undefined && /^-?\d+$/.test(code)) {
          out.set(j, { sandbox_id: sandboxId, job_id: j, completed: true, exit_code: Number(code) });
        } else if (what === "running") out.set(j, { sandbox_id: sandboxId, job_id: j, completed: false, exit_code: null });
        else if (what === "missing") out.set(j, fail(j, "NOT_FOUND", `no background job ${j} in sandbox ${sandboxId}`));
        else out.set(j, fail(j, "RUNTIME_ERROR", `background job ${j} exited without recording an exit code`));
      }
    } catch (err) {
      for (const j of valid) out.set(j, fail(j, "RUNTIME_ERROR", (err as Error).message));
    }
  }
  return ids.map((j) => out.get(j) ?? fail(j, "RUNTIME_ERROR", `no status came back for job ${j}`));
}

export function primeJobRoutes(app: FastifyInstance, s: Services): void {
  app.post("/api/v1/sandbox/background-jobs/status::batchGet", async (req) => {
    const { jobs } = parse(PrimeJobsBatchRequest, req.body);
    const bySandbox = new Map<string, string[]>();
    for (const j of jobs) bySandbox.set(j.sandbox_id, [...(bySandbox.get(j.sandbox_id) ?? []), j.job_id]);
    const results = (
      await Promise.all([...bySandbox].map(([sid, ids]) => sandboxJobs(s, req.principal.teamId, sid, ids)))
    ).flat();
    return {
      statuses: results.filter((r): r is Status => "completed" in r),
      errors: results.filter((r): r is Failure => "code" in r),
    };
  });
}

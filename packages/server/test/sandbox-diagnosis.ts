// What a failing VM test says about its sandbox: its status and error_reason, its last events and
// console lines (GET /logs), and a job's status and output tails. Every read is guarded: a
// diagnosis never throws, so it cannot hide the failure it explains.
import type { Api } from "./helpers.js";

export interface DiagnosisOptions {
  /** A job in the sandbox whose status and output tails to add. */
  jobId?: string;
  /** The job's stdout tail as last seen (kept when the job can no longer be read). */
  lastJobTail?: string;
  events?: number;
  consoleBytes?: number;
  jobBytes?: number;
}

const tail = (s: string, n: number) => (s.length > n ? `...${s.slice(-n)}` : s);

async function read(api: Api, p: string): Promise<{ ok: boolean; body: any; why: string }> {
  try {
    const r = await api("GET", p);
    const ok = r.status >= 200 && r.status < 300;
    return { ok, body: r.body, why: ok ? "" : `${r.status} ${JSON.stringify(r.body).slice(0, 300)}` };
  } catch (err) {
    return { ok: false, body: undefined, why: String(err) };
  }
}

export async function sandboxDiagnosis(api: Api, id: string, o: DiagnosisOptions = {}): Promise<string> {
  const lines: string[] = [];
  const sb = await read(api, `/v1/sandboxes/${id}`);
  lines.push(
    sb.ok ? `sandbox ${id}: ${sb.body.status}, error_reason: ${sb.body.error_reason ?? null}` : `sandbox ${id}: ${sb.why}`,
  );
  const logs = await read(api, `/v1/sandboxes/${id}/logs?tail_bytes=${o.consoleBytes ?? 3000}`);
  if (logs.ok) {
    const events = (logs.body.events ?? []) as Array<{ at: string; message: string }>;
    lines.push(`its last ${Math.min(events.length, o.events ?? 20)} of ${events.length} events:`);
    for (const e of events.slice(-(o.events ?? 20))) lines.push(`  ${e.at} ${e.message}`);
    lines.push(`its console's tail:\n${logs.body.console ?? ""}`);
  } else lines.push(`its logs: ${logs.why}`);
  if (o.jobId) {
    const n = o.jobBytes ?? 4000;
    const job = await read(api, `/v1/sandboxes/${id}/jobs/${o.jobId}`);
    if (job.ok) {
      const j = job.body;
      lines.push(
        `job ${o.jobId}: ${j.status}, exit_code: ${j.exit_code}, error_reason: ${j.error_reason ?? null}`,
        `its stdout's tail:\n${tail(j.stdout_tail ?? "", n)}`,
        `its stderr's tail:\n${tail(j.stderr_tail ?? "", n)}`,
      );
      // A job whose sandbox ended answers with what the host had read of it, maybe less than seen.
      if ((o.lastJobTail ?? "").length > (j.stdout_tail ?? "").length)
        lines.push(`its stdout's tail as last read:\n${tail(o.lastJobTail ?? "", n)}`);
    } else {
      lines.push(`job ${o.jobId}: ${job.why}`, `its stdout's tail as last read:\n${tail(o.lastJobTail ?? "", n)}`);
    }
  }
  return lines.join("\n");
}

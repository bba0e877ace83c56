import { randomBytes } from "node:crypto";
import { GuestError, type Machine, type StatInfo } from "@sandtree/host";
import { type Job, SandtreeError, type StartJobParams } from "@sandtree/protocol";
import { type JobRow, runningJobRow } from "../../store/rows.js";
import type { Store } from "../../store/store.js";
import type { SandboxService } from "../sandboxes/sandbox-service.js";
import { JobTailSaver, type TailPatch } from "./job-tail-saver.js";
import { HeadBuffer } from "./output-spill.js";
import { signalNumber } from "./signals.js";

/** Where a job's pid, output and exit status live in the guest (/run is a tmpfs in most images). */
const JOBS_ROOT = "/run/sandtree/jobs";
const JOB_ID = /^job-[0-9a-f]{16}$/;
/** How much of the end of each stream a job's JSON carries. */
export const JOB_TAIL_BYTES = 16 * 1024;
/** How long a teardown waits to save the tails of a sandbox's running jobs. */
const SAVE_TAILS_MS = 5_000;
/** What the server keeps of a job helper command's output (each stream). */
export const SHORT_OUTPUT_CAP = 64 * 1024;

// As root: the job's directory, owned by the job's user so its wrapper can write there.
const PREPARE = `mkdir -p "$1" && if [ -n "$2" ]; then chown "$2" "$1"; fi`;

// As the job's user, in its cwd and environment. The wrapper (a background subshell) waits
// for the job and writes its status atomically; the job runs in its own session (setsid) so
// a kill reaches its whole process group and never the wrapper. The command is an argument,
// never spliced into the script. Prints the wrapper's pid once the job's pid file exists (or
// the wrapper ended), so a kill right after the start finds the job.
const LAUNCH = `d=$1
s=
command -v setsid >/dev/null 2>&1 && s=setsid
(
  $s sh -c 'echo $$ >"$1/pid.tmp" && mv "$1/pid.tmp" "$1/pid" && exec sh -c "$2"' sandtree-job "$d" "$2" </dev/null >"$d/stdout" 2>"$d/stderr"
  echo $? >"$d/exit.tmp" && mv "$d/exit.tmp" "$d/exit"
) </dev/null >/dev/null 2>&1 &
w=$!
while [ ! -e "$d/pid" ] && kill -0 $w 2>/dev/null; do sleep 0.01 2>/dev/null || sleep 1; done
echo $w`;

// As root: signal the job's process group (its pid is the group id), else the process alone.
const KILL = `p=$(cat "$1/pid") || exit 3
kill -$2 -$p 2>/dev/null || kill -$2 $p`;

function shellQuote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * Background jobs: detached in the guest with their output in files there, so they outlive the
 * request that started them and a re-established agent connection. Status and output are read
 * back with the agent's file operations; metadata and the last tails read are kept in the store
 * (the guest's files end with its machine; tails of running jobs at most every few seconds, see
 * JobTailSaver), and a sandbox's teardown reads them one last time.
 */
export class JobService {
  /** Sandboxes whose jobs' tails are being read one last time, before their machine stops. */
  private readonly saving = new Map<string, Promise<void>>();
  private readonly tails: JobTailSaver;

  constructor(
    private readonly store: Store,
    private readonly sandboxes: SandboxService,
  ) {
    this.tails = new JobTailSaver(store);
    sandboxes.onTeardown(async (id, machine) => {
      if (this.saving.has(id)) return;
      const done = this.saveTails(id, machine);
      this.saving.set(id, done);
      await done.finally(() => this.saving.delete(id));
    });
  }

  /**
   * Before a sandbox's machine is stopped (delete, timeout): reads the tails of its jobs that
   * ran until now (also those a read in the meantime already marked KILLED) once more; then
   * writes what was read last and not written yet (all there is when its machine is gone).
   */
  private async saveTails(sandboxId: string, vm: Machine | undefined): Promise<void> {
    try {
      if (vm) await this.readTailsLast(sandboxId, vm);
    } finally {
      await this.tails.flushSandbox(sandboxId);
    }
  }

  private async readTailsLast(sandboxId: string, vm: Machine): Promise<void> {
    const teamId = (await this.store.getSandbox(sandboxId))?.team_id;
    if (teamId === undefined) return;
    const rows = (await this.store.listJobs(teamId, sandboxId, 100)).filter(
      (r) => r.status === "RUNNING" || r.exit_code === null,
    );
    if (rows.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((res) => {
      timer = setTimeout(res, SAVE_TAILS_MS);
    });
    try {
      await Promise.race([Promise.allSettled(rows.map((r) => this.refresh(r, vm))), deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  async start(teamId: string, sandboxId: string, p: StartJobParams): Promise<Job> {
    const vm = await this.sandboxes.running(teamId, sandboxId);
    const sb = await this.sandboxes.get(teamId, sandboxId);
    const id = `job-${randomBytes(8).toString("hex")}`;
    const dir = `${JOBS_ROOT}/${id}`;
    const command = typeof p.command === "string" ? p.command : p.command.map(shellQuote).join(" ");
    const prep = await runShort(vm, { argv: ["sh", "-c", PREPARE, "sandtree-job", dir, p.user ?? ""] });
    if (prep.exit_code !== 0) throw new SandtreeError("GUEST_ERROR", `could not prepare the job: ${prep.stderr.trim()}`);
    const launch = await runShort(vm, {
      argv: ["sh", "-c", LAUNCH, "sandtree-job", dir, command],
      env: { ...(await this.sandboxes.environmentOf(sb)), ...p.env },
      ...(p.cwd !== undefined ? { cwd: p.cwd } : {}),
      ...(p.user !== undefined ? { user: p.user } : {}),
    });
    const wrapperPid = Number.parseInt(launch.stdout.trim(), 10);
    if (launch.exit_code !== 0 || !Number.isSafeInteger(wrapperPid)) {
      await vm.remove(dir, { recursive: true }).catch(() => {});
      throw new SandtreeError(
        launch.exit_code === 126 || launch.exit_code === 127 ? "VALIDATION_FAILED" : "GUEST_ERROR",
        `could not start the job (exit ${launch.exit_code}): ${launch.stderr.trim() || launch.stdout.trim()}`,
      );
    }
    const row = runningJobRow({
      id,
      team_id: teamId,
      sandbox_id: sandboxId,
      command,
      wrapper_pid: wrapperPid,
      started_at: new Date().toISOString(),
    });
    await this.store.insertJob(row);
    this.tails.started(row);
    return toJob(row);
  }

  private async row(teamId: string, sandboxId: string, jobId: string): Promise<JobRow> {
    await this.sandboxes.get(teamId, sandboxId);
    const row = JOB_ID.test(jobId) ? await this.store.getJob(teamId, sandboxId, jobId) : undefined;
    if (!row) throw new SandtreeError("JOB_NOT_FOUND", `job ${jobId} not found in sandbox ${sandboxId}`, { job_id: jobId });
    return row;
  }

  async get(teamId: string, sandboxId: string, jobId: string): Promise<Job> {
    return this.refresh(await this.row(teamId, sandboxId, jobId));
  }

  async list(teamId: string, sandboxId: string): Promise<{ jobs: Job[] }> {
    await this.sandboxes.get(teamId, sandboxId);
    const rows = await this.store.listJobs(teamId, sandboxId, 100);
    return { jobs: await Promise.all(rows.map((r) => this.refresh(r))) };
  }

  /**
   * Reads the job's state from the guest and records an ending; without a VM, the last known
   * state. `machine` is given only by a teardown, which writes the tails it reads at once.
   */
  private async refresh(row: JobRow, machine?: Machine): Promise<Job> {
    const vm = machine ?? (await this.vmOf(row));
    if (!vm) {
      const saving = this.saving.get(row.sandbox_id);
      if (saving) {
        // Its machine is being stopped: answer with the tails read from it last.
        await saving;
        Object.assign(row, (await this.store.getJob(row.team_id, row.sandbox_id, row.id)) ?? {});
      }
      // Gone without a teardown (it crashed): the tails read from it last.
      await this.tails.flushJob(row);
      if (row.status === "RUNNING") {
        const sb = await this.store.getSandbox(row.sandbox_id);
        const patch = {
          status: "KILLED" as const,
          error_reason: `the sandbox ended (${sb?.status ?? "deleted"}) while the job ran`,
          ended_at: sb?.terminated_at ?? new Date().toISOString(),
        };
        await this.store.updateJob(row.id, patch);
        Object.assign(row, patch);
      }
      return toJob(row);
    }
    const dir = `${JOBS_ROOT}/${row.id}`;
    if (row.status === "RUNNING") {
      // The exit file first: when it exists, the sizes read after it are final.
      let exit = await readExit(vm, dir);
      if (!exit && row.wrapper_pid !== null && !(await statOrNull(vm, `/proc/${row.wrapper_pid}`))) {
        exit = await readExit(vm, dir);
        if (!exit) {
          const patch = {
            status: "KILLED" as const,
            error_reason: "the job's wrapper process is gone without an exit status",
            ended_at: new Date().toISOString(),
          };
          await this.store.updateJob(row.id, patch);
          Object.assign(row, patch);
        }
      }
      if (exit) {
        const patch = {
          status: row.kill_requested && exit.code > 128 ? ("KILLED" as const) : ("EXITED" as const),
          exit_code: exit.code,
          ended_at: await endedAt(vm, dir, row.started_at, exit.atMs),
        };
        await this.store.updateJob(row.id, patch);
        Object.assign(row, patch);
      }
    }
    const known = this.tails.latest(row);
    const [out, err] = await Promise.all([
      readTail(vm, `${dir}/stdout`, { size: known.stdout_bytes, tail: known.stdout_tail }),
      readTail(vm, `${dir}/stderr`, { size: known.stderr_bytes, tail: known.stderr_tail }),
    ]);
    // Kept, so the job shows them once its machine is gone (the files die with it).
    const patch: TailPatch = {
      stdout_bytes: out.size,
      stderr_bytes: err.size,
      stdout_tail: storable(out.tail),
      stderr_tail: storable(err.tail),
    };
    await this.tails.record(row, patch, machine !== undefined);
    return toJob({ ...row, ...patch, stdout_tail: out.tail, stderr_tail: err.tail });
  }

  private async vmOf(row: JobRow): Promise<Machine | null> {
    try {
      return await this.sandboxes.running(row.team_id, row.sandbox_id);
    } catch {
      return null;
    }
  }

  /** A byte range of a job's stdout or stderr (both keep growing while it runs). */
  async output(
    teamId: string,
    sandboxId: string,
    jobId: string,
    q: { stream: "stdout" | "stderr"; offset: number; length?: number },
    signal?: AbortSignal,
  ): Promise<{ size: number; total: number; chunks: AsyncIterable<Buffer> }> {
    await this.row(teamId, sandboxId, jobId);
    const vm = await this.sandboxes.running(teamId, sandboxId);
    const file = `${JOBS_ROOT}/${jobId}/${q.stream}`;
    const total = (await statOrNull(vm, file))?.size ?? 0;
    const size = Math.max(0, Math.min(total - q.offset, q.length ?? Number.POSITIVE_INFINITY));
    // A fixed length: the file may grow while it is sent, the answer's length may not.
    const chunks =
      size > 0 ? vm.readFile(file, { offset: q.offset, length: size, ...(signal ? { signal } : {}) }) : (async function* () {})();
    return { size, total, chunks };
  }

  async kill(teamId: string, sandboxId: string, jobId: string, signal: string | number): Promise<Job> {
    const num = signalNumber(signal);
    const row = await this.row(teamId, sandboxId, jobId);
    const vm = await this.sandboxes.running(teamId, sandboxId);
    const before = await this.refresh(row);
    if (before.status !== "RUNNING") return before;
    await this.store.updateJob(row.id, { kill_requested: true });
    row.kill_requested = true;
    const r = await runShort(vm, { argv: ["sh", "-c", KILL, "sandtree-kill", `${JOBS_ROOT}/${jobId}`, String(num)] });
    if (r.exit_code !== 0) {
      const after = await this.refresh(row);
      if (after.status === "RUNNING") throw new SandtreeError("GUEST_ERROR", `could not signal the job: ${r.stderr.trim()}`);
      return after;
    }
    return this.refresh(row);
  }
}

function toJob(row: JobRow): Job {
  return {
    job_id: row.id,
    sandbox_id: row.sandbox_id,
    command: row.command,
    status: row.status,
    exit_code: row.exit_code,
    stdout_tail: row.stdout_tail,
    stderr_tail: row.stderr_tail,
    stdout_truncated: row.stdout_bytes > JOB_TAIL_BYTES,
    stderr_truncated: row.stderr_bytes > JOB_TAIL_BYTES,
    stdout_bytes: row.stdout_bytes,
    stderr_bytes: row.stderr_bytes,
    started_at: row.started_at,
    ended_at: row.ended_at,
    error_reason: row.error_reason,
  };
}

/** Runs a short helper command in the guest and collects its output. */
async function runShort(
  vm: Machine,
  spec: { argv: string[]; env?: Record<string, string>; cwd?: string; user?: string },
): Promise<{ exit_code: number; stdout: string; stderr: string }> {
  const exec = vm.exec({ ...spec, timeoutMs: 30_000 });
  // Its helpers print a line; a guest that swapped them for a flood is kept to the first 64 KiB.
  const out = new HeadBuffer(SHORT_OUTPUT_CAP);
  const err = new HeadBuffer(SHORT_OUTPUT_CAP);
  try {
    for await (const ev of exec.events) {
      if (ev.type === "stdout") out.push(ev.data);
      else if (ev.type === "stderr") err.push(ev.data);
      else if (ev.type === "exit") {
        return { exit_code: ev.info.exit_code, stdout: out.take(), stderr: err.take() };
      }
    }
  } catch (e) {
    throw new SandtreeError("GUEST_ERROR", `guest command failed: ${(e as Error).message}`);
  }
  throw new SandtreeError("GUEST_ERROR", "guest command ended without an exit status");
}

async function statOrNull(vm: Machine, p: string): Promise<StatInfo | null> {
  try {
    return await vm.stat(p);
  } catch (err) {
    if (err instanceof GuestError && err.errnoCode === "ENOENT") return null;
    throw new SandtreeError("GUEST_ERROR", `stat ${p}: ${(err as Error).message}`);
  }
}

async function readAll(vm: Machine, p: string, offset: number, length: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of vm.readFile(p, { offset, length })) parts.push(chunk);
  return Buffer.concat(parts);
}

async function readExit(vm: Machine, dir: string): Promise<{ code: number; atMs: number } | null> {
  const st = await statOrNull(vm, `${dir}/exit`);
  if (!st) return null;
  const code = Number.parseInt((await readAll(vm, `${dir}/exit`, 0, 64)).toString("utf8").trim(), 10);
  return { code: Number.isSafeInteger(code) ? code : 255, atMs: st.mtime_ms };
}

/**
 * started_at is the host's clock; the guest's may be off by seconds (or minutes after a restore).
 * So ended_at is started_at plus the run time the guest measured between its own two files
 * (pid written at start, exit at the end), and never before started_at nor after now.
 */
async function endedAt(vm: Machine, dir: string, startedAt: string, exitMs: number): Promise<string> {
  const start = Date.parse(startedAt);
  const pid = await statOrNull(vm, `${dir}/pid`);
  const ran = pid ? Math.max(0, exitMs - pid.mtime_ms) : 0;
  return new Date(Math.min(Date.now(), Math.max(start, start + ran))).toISOString();
}

/** A tail as the store keeps it: PostgreSQL's text has no NUL (U+FFFD, as for bytes that are not UTF-8). */
function storable(tail: string): string {
  return tail.replaceAll("\0", "\uFFFD");
}

/** The size and end of an output file; without the file (a guest that lost it), what was known. */
async function readTail(vm: Machine, p: string, known: { size: number; tail: string }): Promise<{ size: number; tail: string }> {
  const st = await statOrNull(vm, p);
  if (!st) return known;
  const size = st.size;
  if (size === 0) return { size, tail: "" };
  const from = Math.max(0, size - JOB_TAIL_BYTES);
  return { size, tail: (await readAll(vm, p, from, size - from)).toString("utf8") };
}

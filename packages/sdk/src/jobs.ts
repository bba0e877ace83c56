import { Job, JobList, type KillJobRequest, type StartJobRequest } from "@sandtree/protocol";
import type { HttpClient, RequestOptions } from "./http.js";
import { sandboxPath } from "./sandbox-path.js";

export interface StartJobOptions extends RequestOptions {
  cwd?: string;
  env?: Record<string, string>;
  user?: string;
}

export interface OutputOptions extends RequestOptions {
  stream?: "stdout" | "stderr";
  offset?: number;
  length?: number;
}

export interface FollowOptions extends Omit<OutputOptions, "length"> {
  /** Time between polls while the job runs (default 500 ms). */
  intervalMs?: number;
}

/** Background jobs: detached commands that run until they end or the sandbox ends. */
export class Jobs {
  constructor(private readonly http: HttpClient) {}

  start(sandboxId: string, command: StartJobRequest["command"], options: StartJobOptions = {}): Promise<Job> {
    const { cwd, env, user, ...rest } = options;
    return this.http.json(Job, {
      ...rest,
      method: "POST",
      path: jobsPath(sandboxId),
      json: { command, ...(cwd !== undefined ? { cwd } : {}), ...(env ? { env } : {}), ...(user !== undefined ? { user } : {}) },
    });
  }

  list(sandboxId: string, options: RequestOptions = {}): Promise<JobList> {
    return this.http.json(JobList, { ...options, method: "GET", path: jobsPath(sandboxId) });
  }

  get(sandboxId: string, jobId: string, options: RequestOptions = {}): Promise<Job> {
    return this.http.json(Job, { ...options, method: "GET", path: `${jobsPath(sandboxId)}/${encodeURIComponent(jobId)}` });
  }

  /** Sends a signal (default SIGTERM) to the job's process group; answers the job's state. */
  kill(
    sandboxId: string,
    jobId: string,
    signal: NonNullable<KillJobRequest["signal"]> = "SIGTERM",
    options: RequestOptions = {},
  ): Promise<Job> {
    return this.http.json(Job, {
      ...options,
      method: "POST",
      path: `${jobsPath(sandboxId)}/${encodeURIComponent(jobId)}/kill`,
      json: { signal },
    });
  }

  /** The bytes of stdout (or stderr) from `offset`, as far as the job has written them. */
  async output(sandboxId: string, jobId: string, options: OutputOptions = {}): Promise<Uint8Array> {
    return readOutput(this.http, `${jobsPath(sandboxId)}/${encodeURIComponent(jobId)}/output`, options);
  }

  /** Yields the job's output as it is written, until the job has ended and everything was read. */
  async *follow(sandboxId: string, jobId: string, options: FollowOptions = {}): AsyncGenerator<Uint8Array, Job, undefined> {
    const { intervalMs = 500, offset: start = 0, ...rest } = options;
    let offset = start;
    for (;;) {
      const job = await this.get(sandboxId, jobId, rest.signal ? { signal: rest.signal } : {});
      for (;;) {
        const bytes = await this.output(sandboxId, jobId, { ...rest, offset });
        if (bytes.length === 0) break;
        offset += bytes.length;
        yield bytes;
      }
      if (job.status !== "RUNNING") return job;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}

/** Reads a byte range of a job's or exec's kept output. */
export async function readOutput(http: HttpClient, path: string, options: OutputOptions): Promise<Uint8Array> {
  const { stream, offset, length, ...request } = options;
  const { body } = await http.bytes({
    ...request,
    method: "GET",
    path,
    query: { stream, offset, length },
    accept: "application/octet-stream",
  });
  return body;
}

function jobsPath(sandboxId: string): string {
  return `${sandboxPath(sandboxId)}/jobs`;
}

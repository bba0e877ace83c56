import type { KillJobRequest } from "@sandtree/protocol";
import type { Job } from "@sandtree/sdk";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { collectKeyValue, parseIntArg } from "../kv.js";
import { formatAge, type OutputFormat, printJson, printResult, renderFields, renderTable } from "../output.js";
import { addListCommand, globalFlags, outputOption } from "./shared.js";

const JOB_HELP = `
A job runs detached in the sandbox until it ends or the sandbox ends (no time limit);
its output is kept in the sandbox and can be read from any offset.

Examples:
  sandtree sandbox job start sb-hzs3n4xqkrgpkpys -- make -j4 test
  sandtree sandbox job start sb-hzs3n4xqkrgpkpys --shell 'npm run build > /tmp/build.log'
  sandtree sandbox job logs sb-hzs3n4xqkrgpkpys job-0123456789abcdef --follow
  sandtree sandbox job kill sb-hzs3n4xqkrgpkpys job-0123456789abcdef --signal SIGKILL`;

export function registerJobCommands(sandbox: Command, ctx: CliContext): void {
  const job = sandbox.command("job").description("background jobs: start, list, get, logs, kill").addHelpText("after", JOB_HELP);

  job
    .command("start")
    .description("start a background job; prints its id")
    .argument("<id>", "sandbox id")
    .argument("[command...]", "argv of the command, after --")
    .option("-e, --env <K=V>", "environment variable (repeatable)", collectKeyValue)
    .option("-w, --cwd <dir>", "working directory")
    .option("--user <user>", "user name or uid to run as")
    .option("--shell <cmd>", "a command string run under /bin/sh -c instead of an argv")
    .addOption(outputOption())
    .action(async (id: string, argv: string[], o: JobStartFlags, cmd: Command) => {
      if (argv.length > 0 === (o.shell !== undefined))
        throw new UsageError("give the command after -- or with --shell (not both)");
      const client = await ctx.client(globalFlags(cmd));
      const started = await client.sandboxes.jobs.start(id, o.shell ?? argv, {
        ...(o.env !== undefined ? { env: o.env } : {}),
        ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
        ...(o.user !== undefined ? { user: o.user } : {}),
      });
      printResult(ctx.stdout, o.output, started, `${started.job_id}\n`);
    });

  addListCommand(job, ctx, {
    description: "list a sandbox's jobs",
    argument: ["<id>", "sandbox id"],
    key: "jobs",
    fetch: async (client, id) => (await client.sandboxes.jobs.list(id as string)).jobs,
    table: (jobs) =>
      renderTable(
        ["JOB", "STATUS", "EXIT", "AGE", "COMMAND"],
        jobs.map((j) => [
          j.job_id,
          j.status,
          j.exit_code === null ? "-" : String(j.exit_code),
          formatAge(j.started_at),
          j.command,
        ]),
      ),
  });

  job
    .command("get")
    .description("show a job's state and the end of its output")
    .argument("<id>", "sandbox id")
    .argument("<job>", "job id")
    .addOption(outputOption())
    .action(async (id: string, jobId: string, o: { output: OutputFormat }, cmd: Command) => {
      const j = await (await ctx.client(globalFlags(cmd))).sandboxes.jobs.get(id, jobId);
      if (o.output === "json") return printJson(ctx.stdout, j);
      ctx.stdout.write(jobFields(j));
    });

  job
    .command("logs")
    .description(
      "print a job's stdout (or --stderr); --follow keeps printing until the job ends, then exits with the job's status",
    )
    .argument("<id>", "sandbox id")
    .argument("<job>", "job id")
    .option("-f, --follow", "keep printing new output until the job ends")
    .option("--stderr", "print stderr instead of stdout")
    .action(async (id: string, jobId: string, o: { follow?: boolean; stderr?: boolean }, cmd: Command) => {
      const jobs = (await ctx.client(globalFlags(cmd))).sandboxes.jobs;
      const stream = o.stderr ? "stderr" : "stdout";
      if (!o.follow) {
        ctx.stdout.write(Buffer.from(await jobs.output(id, jobId, { stream })));
        return;
      }
      const it = jobs.follow(id, jobId, { stream });
      for (;;) {
        const next = await it.next();
        if (next.done) {
          const status = jobExitStatus(next.value);
          if (status !== 0) {
            ctx.stderr.write(`${jobEnding(next.value)}\n`);
            ctx.exitCode = status;
          }
          return;
        }
        ctx.stdout.write(Buffer.from(next.value));
      }
    });

  job
    .command("kill")
    .description("signal a job's process group (default SIGTERM) and wait a few seconds for it to end; prints its id")
    .argument("<id>", "sandbox id")
    .argument("<job>", "job id")
    .option("-s, --signal <signal>", "signal name or number", "SIGTERM")
    .option(
      "--wait-timeout <seconds>",
      "how long to wait for the job to end (0: do not wait)",
      parseIntArg("--wait-timeout", 0),
      10,
    )
    .addOption(outputOption())
    .action(async (id: string, jobId: string, o: { signal: string; waitTimeout: number; output: OutputFormat }, cmd: Command) => {
      const sig = /^\d+$/.test(o.signal) ? Number(o.signal) : o.signal.toUpperCase();
      const jobs = (await ctx.client(globalFlags(cmd))).sandboxes.jobs;
      let j = await jobs.kill(id, jobId, sig as NonNullable<KillJobRequest["signal"]>);
      // The signal is sent; the job ends a moment later (or never, if it handles the signal).
      const deadline = Date.now() + o.waitTimeout * 1000;
      while (j.status === "RUNNING" && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
        j = await jobs.get(id, jobId);
      }
      if (j.status === "RUNNING") ctx.stderr.write(`${j.job_id}: signal sent; the job is still RUNNING\n`);
      else ctx.stderr.write(`${j.job_id}: ${jobEnding(j)}\n`);
      printResult(ctx.stdout, o.output, j, `${j.job_id}\n`);
    });
}

/** The exit status a shell would give for an ended job: its code, else 1 (killed without one). */
export function jobExitStatus(j: Pick<Job, "status" | "exit_code">): number {
  if (j.exit_code !== null) return Math.min(255, Math.max(0, j.exit_code));
  return j.status === "EXITED" ? 0 : 1;
}

/** "job exited 3", "job killed by signal 15 (exit 143)", "job killed: the sandbox ended ...". */
export function jobEnding(j: Pick<Job, "status" | "exit_code" | "error_reason">): string {
  if (j.status === "KILLED" && j.exit_code !== null && j.exit_code > 128) {
    return `job killed by signal ${j.exit_code - 128} (exit ${j.exit_code})`;
  }
  if (j.exit_code !== null) return `job exited ${j.exit_code}`;
  return `job ${j.status.toLowerCase()}${j.error_reason ? `: ${j.error_reason}` : ""}`;
}

interface JobStartFlags {
  env?: Record<string, string>;
  cwd?: string;
  user?: string;
  shell?: string;
  output: OutputFormat;
}

function jobFields(j: Job): string {
  let text = renderFields([
    ["job", j.job_id],
    ["status", j.status],
    ["exit code", j.exit_code === null ? "-" : String(j.exit_code)],
    ...(j.error_reason ? [["error", j.error_reason] as const] : []),
    ["command", j.command],
    ["output", `${j.stdout_bytes} bytes stdout, ${j.stderr_bytes} bytes stderr`],
    ["started", j.started_at],
    ["ended", j.ended_at ?? "-"],
  ]);
  if (j.stdout_tail) text += `\n--- stdout${j.stdout_truncated ? " (end)" : ""} ---\n${j.stdout_tail}`;
  if (j.stderr_tail) text += `\n--- stderr${j.stderr_truncated ? " (end)" : ""} ---\n${j.stderr_tail}`;
  return text;
}

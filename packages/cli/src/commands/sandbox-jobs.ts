import type { KillJobRequest } from "@sandtree/protocol";
import type { Job } from "@sandtree/sdk";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { UsageError } from "../errors.js";
import { collectKeyValue } from "../kv.js";
import { formatAge, type OutputFormat, printJson, renderFields, renderTable } from "../output.js";
import { globalFlags, outputOption } from "./shared.js";

const JOB_HELP = `
A job runs detached in the sandbox until it ends or the sandbox ends (no time limit);
its output is kept in the sandbox and can be read from any offset.

Examples:
  sandtree sandbox job start sb_123 -- make -j4 test
  sandtree sandbox job start sb_123 --shell 'npm run build > /tmp/build.log'
  sandtree sandbox job logs sb_123 job-0123456789abcdef --follow
  sandtree sandbox job kill sb_123 job-0123456789abcdef --signal SIGKILL`;

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
      if (o.output === "json") printJson(ctx.stdout, started);
      else ctx.stdout.write(`${started.job_id}\n`);
    });

  job
    .command("list")
    .alias("ls")
    .description("list a sandbox's jobs")
    .argument("<id>", "sandbox id")
    .addOption(outputOption())
    .action(async (id: string, o: { output: OutputFormat }, cmd: Command) => {
      const { jobs } = await (await ctx.client(globalFlags(cmd))).sandboxes.jobs.list(id);
      if (o.output === "json") return printJson(ctx.stdout, jobs);
      ctx.stdout.write(
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
      );
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
    .description("print a job's stdout (or --stderr); --follow keeps printing until the job ends")
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
          if (next.value.status === "KILLED" || (next.value.exit_code ?? 0) !== 0) ctx.exitCode = 1;
          return;
        }
        ctx.stdout.write(Buffer.from(next.value));
      }
    });

  job
    .command("kill")
    .description("signal a job's process group (default SIGTERM)")
    .argument("<id>", "sandbox id")
    .argument("<job>", "job id")
    .option("-s, --signal <signal>", "signal name or number", "SIGTERM")
    .action(async (id: string, jobId: string, o: { signal: string }, cmd: Command) => {
      const sig = /^\d+$/.test(o.signal) ? Number(o.signal) : o.signal.toUpperCase();
      const j = await (await ctx.client(globalFlags(cmd))).sandboxes.jobs.kill(
        id,
        jobId,
        sig as NonNullable<KillJobRequest["signal"]>,
      );
      ctx.stdout.write(`${j.job_id} ${j.status}\n`);
    });
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

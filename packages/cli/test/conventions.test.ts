import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { CreateSandboxRequest } from "@sandtree/protocol";
import type { SandtreeClient } from "@sandtree/sdk";
import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import { localTarget, remoteTarget } from "../src/commands/sandbox-files.js";
import { jobEnding, jobExitStatus } from "../src/commands/sandbox-jobs.js";
import { exitStatusOf } from "../src/commands/sandbox-run.js";
import { MIN_MEMORY_GB } from "../src/commands/shared.js";
import type { CliContext } from "../src/context.js";
import { describeError } from "../src/errors.js";
import { buildProgram } from "../src/program.js";
import { serveInfoLines } from "../src/serve-info.js";
import { cli, recorded } from "./stub-cli.js";

function leaves(cmd: Command, prefix = ""): Array<{ name: string; cmd: Command }> {
  const name = `${prefix}${prefix ? " " : ""}${cmd.name()}`;
  if (cmd.commands.length === 0) return [{ name, cmd }];
  return cmd.commands.flatMap((c) => leaves(c, name));
}

const nullCtx = (): CliContext => ({
  stdout: new PassThrough(),
  stderr: new PassThrough(),
  stdin: new PassThrough(),
  env: {},
  client: async () => ({}) as SandtreeClient,
  exitCode: 0,
});

const job = {
  job_id: "job-0123456789abcdef",
  sandbox_id: "sb-hzs3n4xqkrgpkpys",
  command: "false",
  status: "EXITED",
  exit_code: 3,
  stdout_tail: "",
  stderr_tail: "",
  stdout_truncated: false,
  stderr_truncated: false,
  stdout_bytes: 0,
  stderr_bytes: 0,
  started_at: "2026-12-03T12:14:17.634Z",
  ended_at: "2026-12-03T12:14:17.820Z",
  error_reason: null,
};

describe("exit statuses (#21 item 2)", () => {
  it("a --timeout kill is 124 as the help says, although the agent killed it with SIGKILL", () => {
    // What the API answers for `run --timeout 2 -- sleep 10`.
    expect(exitStatusOf({ exit_code: 124, signal: 9, timed_out: true })).toBe(124);
    expect(exitStatusOf({ exit_code: 137, signal: 9, timed_out: false })).toBe(137);
    expect(exitStatusOf({ exit_code: 0, signal: null })).toBe(0);
  });
});

describe("usage errors say what is wrong (#21 item 6)", () => {
  it("network --allow with --deny exits 2 with a message", async () => {
    const r = await cli(["sandbox", "network", "sb-hzs3n4xqkrgpkpys", "--allow", "a.com", "--deny", "b.com"]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/^error: USAGE: .*--allow.*--deny/);
  });
});

describe("job logs --follow (#21 item 7)", () => {
  it("of a failed job says `job exited N` on stderr and exits N", async () => {
    const jobs = {
      follow: async function* () {
        yield new TextEncoder().encode("some output\n");
        return job;
      },
    };
    const r = await cli(["sandbox", "job", "logs", "sb-hzs3n4xqkrgpkpys", job.job_id, "--follow"], { sandboxes: { jobs } });
    expect(r).toMatchObject({ code: 3, out: "some output\n", err: "job exited 3\n" });
    expect(jobExitStatus({ status: "KILLED", exit_code: null })).toBe(1);
    expect(jobEnding({ status: "KILLED", exit_code: 143, error_reason: null })).toBe("job killed by signal 15 (exit 143)");
  });

  it("job kill waits for the ending and does not print the job as RUNNING", async () => {
    let gets = 0;
    const jobs = {
      kill: async () => ({ ...job, status: "RUNNING", exit_code: null }),
      get: async () =>
        ++gets < 2 ? { ...job, status: "RUNNING", exit_code: null } : { ...job, status: "KILLED", exit_code: 143 },
    };
    const r = await cli(["sandbox", "job", "kill", "sb-hzs3n4xqkrgpkpys", job.job_id], { sandboxes: { jobs } });
    expect(r).toMatchObject({ code: 0, out: `${job.job_id}\n` });
    expect(r.err).toContain("killed by signal 15");
    expect(r.out + r.err).not.toContain("RUNNING");
  });
});

describe("file copies (#21 item 9)", () => {
  it("a local error's code is printed once", () => {
    const e = Object.assign(new Error("ENOENT: no such file or directory, open './data.csv'"), { code: "ENOENT" });
    expect(describeError(e).line).toBe("error: ENOENT: no such file or directory, open './data.csv'");
  });

  it("download into a directory keeps the file's name, as cp does; upload to a path ending in /", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "sandtree-cli-"));
    try {
      expect(await localTarget(dir, "/etc/hostname")).toBe(path.join(dir, "hostname"));
      expect(await localTarget(`${dir}/`, "/etc/hostname")).toBe(path.join(dir, "hostname"));
      expect(await localTarget(path.join(dir, "x.txt"), "/etc/hostname")).toBe(path.join(dir, "x.txt"));
      expect(remoteTarget("./data.csv", "/root/")).toBe("/root/data.csv");
      expect(remoteTarget("./data.csv", "/root/d.csv")).toBe("/root/d.csv");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("checkpoint restore (#21 item 3)", () => {
  it("restore --wait creates without asking for -y and sends no sizes it was not given", async () => {
    const created: unknown[] = [];
    const sandboxes = {
      create: async (req: unknown) => recorded(created, req, { id: "sb-hzs3n4xqkrgpkpys", status: "PENDING" }),
      waitForCreation: async (id: string) => ({ id, status: "RUNNING" }),
    };
    const r = await cli(["sandbox", "checkpoint", "restore", "ck-0123", "--wait"], { sandboxes });
    expect(r).toMatchObject({ code: 0, out: "sb-hzs3n4xqkrgpkpys\n" });
    expect(created).toEqual([{ checkpoint_id: "ck-0123" }]);
  });
});

describe("one output convention, consistent help (#21 item 11)", () => {
  const program = buildProgram(nullCtx());
  const all = leaves(program).filter((l) => l.name !== "sandtree");
  /** Commands whose stdout is a stream of the sandbox's own bytes, or that run a server. */
  const STREAMS = new Set([
    "sandtree sandbox run",
    "sandtree sandbox ssh",
    "sandtree sandbox job logs",
    "sandtree sandbox port-forward",
    "sandtree serve",
    "sandtree worker",
    "sandtree setup",
  ]);

  it("every other command takes -o table|json; none has a --json of its own in the help", () => {
    for (const { name, cmd } of all) {
      if (STREAMS.has(name)) continue;
      const o = cmd.options.find((opt) => opt.long === "--output");
      expect(o, `${name} has -o`).toBeDefined();
      expect(o?.short).toBe("-o");
      // `usage` also exports CSV (the API's format=csv), a third form, not another flag.
      expect(o?.argChoices).toEqual(name === "sandtree usage" ? ["table", "json", "csv"] : ["table", "json"]);
      expect(cmd.helpInformation(), name).not.toMatch(/--json/);
    }
  });

  it("every command has a description; help texts give real-looking ids and no doubled defaults", () => {
    for (const { name, cmd } of all) {
      expect(cmd.description(), name).not.toBe("");
      const help = cmd.helpInformation() + ((cmd as unknown as { _helpText?: string })._helpText ?? "");
      expect(help, name).not.toMatch(/sb_\d/);
      expect(help, name).not.toMatch(/\(default \d+\) \(default/);
    }
    const run = all.find((l) => l.name === "sandtree sandbox run")?.cmd;
    const out = new PassThrough();
    let text = "";
    out.on("data", (d) => (text += d));
    run?.configureOutput({ writeOut: (s) => (text += s) }).outputHelp();
    expect(text).toContain("sb-hzs3n4xqkrgpkpys");
  });

  it("-e, --env is the same flag wherever a command takes an environment", () => {
    for (const { name, cmd } of all) {
      const env = cmd.options.find((opt) => opt.long === "--env");
      if (env) expect(env.short, name).toBe("-e");
    }
    for (const name of ["sandtree sandbox create", "sandtree sandbox run", "sandtree sandbox job start"]) {
      expect(all.find((l) => l.name === name)?.cmd.options.some((opt) => opt.short === "-e")).toBe(true);
    }
  });

  it("--memory-gb takes what the server takes (>= 0.125)", async () => {
    expect(CreateSandboxRequest.safeParse({ image: "x", memory_gb: MIN_MEMORY_GB }).success).toBe(true);
    expect(CreateSandboxRequest.safeParse({ image: "x", memory_gb: MIN_MEMORY_GB - 0.001 }).success).toBe(false);
    const small = await cli(["sandbox", "create", "sandtree/busybox", "--memory-gb", "0.1"]);
    expect(small.code).toBe(2);
    expect(small.err).toContain("--memory-gb must be a number >= 0.125");
    const ok = await cli(["sandbox", "create", "sandtree/busybox", "--memory-gb", "0.125"], {
      sandboxes: { create: async () => ({ id: "sb-hzs3n4xqkrgpkpys" }) },
    });
    expect(ok).toMatchObject({ code: 0, out: "sb-hzs3n4xqkrgpkpys\n" });
  });

  it("checkpoint get prints `key: value` lines", async () => {
    const c = {
      id: "ck-1",
      state: "DURABLE",
      sandbox_id: "sb-hzs3n4xqkrgpkpys",
      parent_id: null,
      depth: 0,
      image: "sandtree/busybox",
      disk_size_bytes: 1024 ** 3,
      stored_bytes: 2048,
      error: null,
      created_at: "2026-12-03T12:00:00.000Z",
      expires_at: null,
    };
    const r = await cli(["sandbox", "checkpoint", "get", "ck-1"], { checkpoints: { get: async () => c } });
    expect(r.out).toMatch(/^id: +ck-1\nstate: +DURABLE\n/);
    expect(r.out).not.toContain("::");
  });
});

describe("serve says what it runs on (#21 item 12)", () => {
  it("names the accelerator and why, and whether sandbox networks are on and why not", () => {
    const base = {
      choice: "auto",
      choiceFrom: "default",
      kvmDevice: true,
      networkEnabled: true,
      networkUnavailable: null,
    } as const;
    expect(serveInfoLines({ ...base, accel: "kvm" })).toEqual([
      "accelerator: kvm (auto: a trial KVM boot succeeded)",
      "sandbox networks: on",
    ]);
    const [tcg, off] = serveInfoLines({
      ...base,
      accel: "tcg",
      networkEnabled: false,
      networkUnavailable: "networking is turned off in the server's configuration",
    });
    expect(tcg).toMatch(/^accelerator: tcg \(auto: a trial KVM boot failed/);
    expect(off).toMatch(/^sandbox networks: off \(networking is turned off/);
    expect(serveInfoLines({ ...base, accel: "tcg", kvmDevice: false })[0]).toContain("no usable /dev/kvm");
    expect(serveInfoLines({ ...base, choice: "tcg", choiceFrom: "--accel", accel: "tcg" })[0]).toBe(
      "accelerator: tcg (set by --accel)",
    );
  });
});

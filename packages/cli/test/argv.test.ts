import { PassThrough } from "node:stream";
import type { SandtreeClient } from "@sandtree/sdk";
import { describe, expect, it } from "vitest";
import type { CliContext } from "../src/context.js";
import { runCli } from "../src/program.js";

/** Runs the CLI with a stub client that records what the commands ask the SDK for. */
async function cli(argv: string[], client: Record<string, unknown> = {}) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const stdin = Object.assign(new PassThrough(), { isTTY: false });
  let out = "";
  let err = "";
  stdout.on("data", (d) => (out += d));
  stderr.on("data", (d) => (err += d));
  const flags: unknown[] = [];
  const ctx: CliContext = {
    stdout,
    stderr,
    stdin,
    env: {},
    client: async (f) => {
      flags.push(f);
      return client as unknown as SandtreeClient;
    },
    exitCode: 0,
  };
  const code = await runCli(argv, ctx);
  return { code, out, err, flags };
}

const sb = { id: "sb_1", status: "PENDING" };

describe("argv handling", () => {
  it("create maps flags to the wire request and prints the id", async () => {
    const calls: unknown[] = [];
    const r = await cli(
      [
        "sandbox",
        "create",
        "alpine:3.20",
        "--cpu-cores",
        "2",
        "--memory-gb",
        "1.5",
        "--env",
        "A=1",
        "--env",
        "B=x=y",
        "--label",
        "team=a",
        "--api-key",
        "k",
      ],
      {
        sandboxes: {
          create: async (req: unknown) => {
            calls.push(req);
            return sb;
          },
        },
      },
    );
    expect(r).toMatchObject({ code: 0, out: "sb_1\n", flags: [{ apiKey: "k" }] });
    expect(calls).toEqual([
      { image: "alpine:3.20", cpu_cores: 2, memory_gb: 1.5, environment_vars: { A: "1", B: "x=y" }, labels: { team: "a" } },
    ]);
  });

  it("run passes the words after -- through untouched, options included", async () => {
    const calls: unknown[] = [];
    const handle = {
      output: async function* () {
        yield { type: "stdout", data: new TextEncoder().encode("hi\n") };
        yield { type: "stderr", data: new TextEncoder().encode("warn\n") };
        yield { type: "exit", exit_code: 7, signal: null, timed_out: false, duration_ms: 1 };
      },
    };
    const client = {
      sandboxes: {
        exec: async (...args: unknown[]) => {
          calls.push(args);
          return handle;
        },
      },
    };
    const r = await cli(
      ["sandbox", "run", "sb_1", "-e", "A=1", "-w", "/tmp", "--no-stdin", "--", "ls", "-la", "--timeout", "x y"],
      client,
    );
    expect(r).toMatchObject({ code: 7, out: "hi\n", err: "warn\n" });
    expect(calls).toEqual([["sb_1", ["ls", "-la", "--timeout", "x y"], { env: { A: "1" }, cwd: "/tmp" }]]);
  });

  it("run --shell sends a string", async () => {
    const calls: unknown[] = [];
    const handle = {
      output: async function* () {
        yield { type: "exit", exit_code: 0, signal: 9, timed_out: false, duration_ms: 1 };
      },
    };
    const r = await cli(["sandbox", "run", "sb_1", "--no-stdin", "--shell", "echo a | wc"], {
      sandboxes: {
        exec: async (...args: unknown[]) => {
          calls.push(args[1]);
          return handle;
        },
      },
    });
    expect(calls).toEqual(["echo a | wc"]);
    expect(r.code).toBe(137);
  });

  it("usage errors exit 2 with 'error: USAGE:'; API errors exit 1 with their code", async () => {
    const bad = await cli(["sandbox", "create", "img", "--env", "oops"]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/^error: USAGE: .*KEY=VALUE/);
    const noYes = await cli(["sandbox", "delete", "sb_1"]);
    expect(noYes).toMatchObject({ code: 2, err: expect.stringMatching(/^error: USAGE: refusing to delete without -y/) });
    const api = await cli(["sandbox", "get", "sb_9"], {
      sandboxes: {
        get: async () => Promise.reject(Object.assign(new Error("sandbox sb_9 not found"), { code: "SANDBOX_NOT_FOUND" })),
      },
    });
    expect(api).toMatchObject({ code: 1, err: "error: SANDBOX_NOT_FOUND: sandbox sb_9 not found\n" });
  });

  it("delete -y deletes each id, reports failures, and exits 1 if any failed", async () => {
    const r = await cli(["sandbox", "delete", "a", "b", "-y"], {
      sandboxes: {
        delete: async (id: string) =>
          id === "b" ? Promise.reject(Object.assign(new Error("gone"), { code: "SANDBOX_NOT_FOUND" })) : { id },
      },
    });
    expect(r).toMatchObject({ code: 1, out: "a\n", err: "error: SANDBOX_NOT_FOUND: gone\n" });
  });

  it("list -o json prints every page's sandboxes as one array", async () => {
    const seen: unknown[] = [];
    const r = await cli(["sandbox", "list", "--status", "running", "--label", "a=b", "-o", "json"], {
      sandboxes: {
        listAll: async function* (opts: unknown) {
          seen.push(opts);
          yield sb;
          yield { ...sb, id: "sb_2" };
        },
      },
    });
    expect(seen).toEqual([{ status: "RUNNING", labels: { a: "b" } }]);
    expect(JSON.parse(r.out)).toEqual([sb, { ...sb, id: "sb_2" }]);
  });

  it("image pull reads the password from stdin", async () => {
    const calls: unknown[] = [];
    const stdinText = "s3cret\n";
    const stdout = new PassThrough();
    let out = "";
    stdout.on("data", (d) => (out += d));
    const stdin = Object.assign(new PassThrough(), { isTTY: false });
    stdin.end(stdinText);
    const ctx: CliContext = {
      stdout,
      stderr: new PassThrough(),
      stdin,
      env: {},
      client: async () =>
        ({
          images: {
            pull: async (ref: string, o: unknown) => {
              calls.push([ref, o]);
              return { ref, digest: "sha256:ab" };
            },
          },
        }) as unknown as SandtreeClient,
      exitCode: 0,
    };
    expect(await runCli(["image", "pull", "reg/x:1", "--username", "me", "--password-stdin"], ctx)).toBe(0);
    expect(calls).toEqual([["reg/x:1", { credentials: { username: "me", password: "s3cret" } }]]);
    expect(out).toBe("reg/x:1 sha256:ab\n");
  });
});

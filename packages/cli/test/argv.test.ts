import { PassThrough } from "node:stream";
import type { SandtreeClient } from "@sandtree/sdk";
import { describe, expect, it } from "vitest";
import { sandbox } from "../../sdk/test/fake-server.js";
import type { CliContext } from "../src/context.js";
import { runCli } from "../src/program.js";
import { cli, recorded } from "./stub-cli.js";

const sb = { id: "sb_1", status: "PENDING" };
/** A whole Sandbox (the SDK tests' wire one), for the commands that render one. */
const full = sandbox(sb);

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
          create: async (req: unknown) => recorded(calls, req, sb),
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
        exec: async (...args: unknown[]) => recorded(calls, args, handle),
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
        exec: async (...args: unknown[]) => recorded(calls, args[1], handle),
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

  it("list -o json prints one page as the API answers it, { sandboxes, next_cursor }", async () => {
    const seen: unknown[] = [];
    const page = { sandboxes: [sb, { ...sb, id: "sb_2" }], next_cursor: "c2" };
    const r = await cli(
      ["sandbox", "list", "--status", "running", "--label", "a=b", "--host", "w1", "--limit", "2", "-o", "json"],
      {
        sandboxes: {
          list: async (opts: unknown) => recorded(seen, opts, page),
        },
      },
    );
    expect(r.code, r.err).toBe(0);
    expect(seen).toEqual([{ status: "RUNNING", labels: { a: "b" }, host: "w1", limit: 2 }]);
    expect(JSON.parse(r.out)).toEqual(page);
  });

  it("list --all follows next_cursor to the end; the table names the next page without --all", async () => {
    const seen: Array<{ cursor?: string }> = [];
    const pages: Record<string, { sandboxes: unknown[]; next_cursor: string | null }> = {
      first: { sandboxes: [sb], next_cursor: "c2" },
      c2: { sandboxes: [{ ...sb, id: "sb_2" }], next_cursor: "c3" },
      c3: { sandboxes: [{ ...sb, id: "sb_3" }], next_cursor: null },
    };
    const client = {
      sandboxes: {
        list: async (opts: { cursor?: string }) => recorded(seen, opts, pages[opts.cursor ?? "first"]),
      },
    };
    const all = await cli(["sandbox", "list", "--all", "-o", "json"], client);
    expect(seen.map((o) => o.cursor)).toEqual([undefined, "c2", "c3"]);
    expect(JSON.parse(all.out)).toEqual({ sandboxes: [sb, { ...sb, id: "sb_2" }, { ...sb, id: "sb_3" }], next_cursor: null });
    const from = await cli(["sandbox", "list", "--cursor", "c2", "-o", "json"], client);
    expect(JSON.parse(from.out)).toEqual(pages.c2);
    const table = await cli(["sandbox", "list"], { sandboxes: { list: async () => ({ sandboxes: [full], next_cursor: "c2" }) } });
    expect(table.err).toBe("more on the next page: --cursor c2 (or --all for every page)\n");
  });

  it("shows a sandbox's host (admin keys get it) in get and in the list's HOST column", async () => {
    const client = {
      sandboxes: {
        get: async () => ({ ...full, host: "worker-1" }),
        list: async () => ({ sandboxes: [{ ...full, host: "worker-1" }], next_cursor: null }),
      },
    };
    expect((await cli(["sandbox", "get", "sb_1"], client)).out).toMatch(/^host: +worker-1$/m);
    const table = (await cli(["sandbox", "list"], client)).out.split("\n");
    expect(table[0]).toMatch(/\bAGE +HOST +LABELS$/);
    expect(table[1]).toMatch(/ worker-1 +-$/);
    // A non-admin key's answer has no host: no HOST column, no host line.
    const plain = { sandboxes: { get: async () => full, list: async () => ({ sandboxes: [full], next_cursor: null }) } };
    expect((await cli(["sandbox", "get", "sb_1"], plain)).out).not.toMatch(/^host:/m);
    expect((await cli(["sandbox", "list"], plain)).out).not.toContain("HOST");
  });

  it("every list command's -o json is the API's answer: an object naming its list", async () => {
    const cases: Array<[string[], Record<string, unknown>, string]> = [
      [["host", "list"], { hosts: { list: async () => [{ name: "local" }] } }, "hosts"],
      [["image", "list"], { images: { list: async () => [{ ref: "sandtree/busybox" }] } }, "images"],
      [["image", "aliases"], { images: { listAliases: async () => [{ name: "python", target: "sandtree/debian" }] } }, "aliases"],
      [["team", "list"], { teams: { list: async () => [{ name: "default" }] } }, "teams"],
      [["key", "list"], { keys: { list: async () => [{ id: "key_1" }] } }, "keys"],
      [["sandbox", "job", "list", "sb_1"], { sandboxes: { jobs: { list: async () => ({ jobs: [{ job_id: "j1" }] }) } } }, "jobs"],
      [["sandbox", "list-ports", "sb_1"], { sandboxes: { listPorts: async () => [{ port: 80 }] } }, "ports"],
      [["sandbox", "checkpoint", "list", "sb_1"], { checkpoints: { list: async () => [{ id: "ck-1" }] } }, "checkpoints"],
    ];
    for (const [argv, client, field] of cases) {
      const r = await cli([...argv, "-o", "json"], client);
      expect(r.code, `${argv.join(" ")}: ${r.err}`).toBe(0);
      const body = JSON.parse(r.out);
      expect(Object.keys(body), argv.join(" ")).toEqual([field]);
      expect(Array.isArray(body[field])).toBe(true);
    }
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
            pull: async (ref: string, o: unknown) => recorded(calls, [ref, o], { ref, digest: "sha256:ab" }),
          },
        }) as unknown as SandtreeClient,
      exitCode: 0,
    };
    expect(await runCli(["image", "pull", "reg/x:1", "--username", "me", "--password-stdin"], ctx)).toBe(0);
    expect(calls).toEqual([["reg/x:1", { credentials: { username: "me", password: "s3cret" } }]]);
    expect(out).toBe("reg/x:1 sha256:ab\n");
  });
});

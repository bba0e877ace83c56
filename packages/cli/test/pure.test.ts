import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sandboxTable } from "../src/commands/sandbox.js";
import { buildCommand, exitStatusOf } from "../src/commands/sandbox-run.js";
import { defaultDataDir, parseCredentials, resolveCliConfig } from "../src/config.js";
import { collectKeyValue, parseKeyValue } from "../src/kv.js";
import { formatAge, formatBytes, renderTable } from "../src/output.js";

describe("K=V parsing", () => {
  it("splits at the first '=' and keeps the rest", () => {
    expect(parseKeyValue("A=1")).toEqual(["A", "1"]);
    expect(parseKeyValue("URL=http://x/?a=b")).toEqual(["URL", "http://x/?a=b"]);
    expect(parseKeyValue("EMPTY=")).toEqual(["EMPTY", ""]);
  });
  it("rejects a missing key or '='", () => {
    expect(() => parseKeyValue("novalue")).toThrow(/KEY=VALUE/);
    expect(() => parseKeyValue("=v")).toThrow(/KEY=VALUE/);
  });
  it("collects repeated flags, the last one winning", () => {
    expect(collectKeyValue("B=2", collectKeyValue("A=1", collectKeyValue("A=0")))).toEqual({ A: "1", B: "2" });
  });
});

describe("tables", () => {
  it("aligns columns without trailing spaces", () => {
    expect(
      renderTable(
        ["ID", "NAME"],
        [
          ["a", "x"],
          ["long-id", "-"],
        ],
      ),
    ).toBe("ID       NAME\na        x\nlong-id  -\n");
  });
  it("keeps rows on one line and tolerates missing cells", () => {
    expect(renderTable(["A", "B", "C"], [["x\ny", "1"]])).toBe("A    B  C\nx y  1\n");
  });
  it("renders sandboxes", () => {
    const now = Date.parse("2025-01-01T01:00:00Z");
    const sb = {
      id: "sb_1",
      name: null,
      team_id: "t",
      image: "alpine:3.20",
      image_digest: null,
      status: "RUNNING" as const,
      cpu_cores: 2,
      memory_gb: 0.5,
      disk_size_gb: 4,
      environment_vars: {},
      labels: { team: "a" },
      start_command: null,
      accel: "kvm",
      error_reason: null,
      created_at: "2025-01-01T00:55:00Z",
      updated_at: "",
      started_at: null,
      terminated_at: null,
    };
    expect(sandboxTable([sb], now)).toBe(
      "ID    NAME  IMAGE        STATUS   CPU  MEM   DISK  AGE  LABELS\nsb_1  -     alpine:3.20  RUNNING  2    0.5G  4G    5m   team=a\n",
    );
  });
  it("formats sizes and ages", () => {
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatBytes(300 * 1024 * 1024)).toBe("300 MiB");
    expect(formatAge("2025-01-01T00:00:00Z", Date.parse("2025-01-03T00:00:00Z"))).toBe("2d");
    expect(formatAge(null)).toBe("-");
  });
});

describe("run argv", () => {
  it("keeps argv words as they are: one word with spaces stays one element", () => {
    expect(buildCommand(["ls", "-la", "/"], undefined)).toEqual(["ls", "-la", "/"]);
    expect(buildCommand(["echo hi | wc"], undefined)).toEqual(["echo hi | wc"]);
  });
  it("--shell gives a string for /bin/sh -c, and excludes an argv", () => {
    expect(buildCommand([], "echo hi | wc -c")).toBe("echo hi | wc -c");
    expect(() => buildCommand(["ls"], "ls")).toThrow(/not both/);
    expect(() => buildCommand([], undefined)).toThrow(/missing command/);
  });
  it("maps exits to statuses", () => {
    const exit = { exit_code: 3, signal: null, timed_out: false, duration_ms: 1 };
    expect(exitStatusOf(exit)).toBe(3);
    expect(exitStatusOf({ ...exit, exit_code: 137, signal: 9 })).toBe(137);
    expect(exitStatusOf({ ...exit, exit_code: -1, signal: 15 })).toBe(143);
    expect(exitStatusOf({ ...exit, exit_code: 124, timed_out: true })).toBe(124);
  });
});

describe("config", () => {
  it("finds the data dir", () => {
    expect(defaultDataDir({ SANDTREE_DATA_DIR: "/d" })).toBe("/d");
    expect(defaultDataDir({ XDG_DATA_HOME: "/x" })).toBe("/x/sandtree");
    expect(defaultDataDir({ HOME: "/h" })).toBe("/h/.local/share/sandtree");
  });
  it("parses the server's credentials file", () => {
    const text =
      "# written by sandtree\nexport SANDTREE_API_URL=http://127.0.0.1:7070\nexport SANDTREE_API_KEY='sk_abc'\nSOMETHING else\n";
    expect(parseCredentials(text)).toEqual({ SANDTREE_API_URL: "http://127.0.0.1:7070", SANDTREE_API_KEY: "sk_abc" });
  });
  it("flag > env > credentials file > default", async () => {
    const dir = await mkdtemp(join(tmpdir(), "cli-cfg-"));
    await writeFile(
      join(dir, "credentials.env"),
      'export SANDTREE_API_URL="http://file:1"\nexport SANDTREE_API_KEY="file-key"\n',
    );
    const env = { SANDTREE_DATA_DIR: dir };
    expect(await resolveCliConfig({}, env)).toEqual({ apiUrl: "http://file:1", apiKey: "file-key" });
    expect(await resolveCliConfig({ apiUrl: "http://flag:2" }, env)).toEqual({ apiUrl: "http://flag:2", apiKey: "file-key" });
    // The key from the environment, the URL from where the local server said it listens.
    expect(await resolveCliConfig({}, { ...env, SANDTREE_API_KEY: "env-key" })).toEqual({
      apiUrl: "http://file:1",
      apiKey: "env-key",
    });
    expect(await resolveCliConfig({}, { SANDTREE_DATA_DIR: join(dir, "none"), SANDTREE_API_KEY: "e" })).toEqual({
      apiUrl: "http://127.0.0.1:7070",
      apiKey: "e",
    });
    expect(
      await resolveCliConfig({ apiKey: "flag-key" }, { ...env, SANDTREE_API_KEY: "env-key", SANDTREE_API_URL: "http://env:3" }),
    ).toEqual({
      apiUrl: "http://env:3",
      apiKey: "flag-key",
    });
    await expect(resolveCliConfig({}, { SANDTREE_DATA_DIR: join(dir, "none") })).rejects.toMatchObject({
      code: "MISSING_API_KEY",
    });
  });
});

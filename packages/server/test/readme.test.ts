/**
 * Runs README.md's "## Using it" shell block, line by line and in order, against a real server
 * with sandbox networks (in network namespaces this test makes, as root), through the real CLI,
 * and checks what each line prints. A README line without an expectation here fails the test,
 * so the README cannot drift from the product. (docs/api.md has no shell examples to run.)
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { writeRootfsLayout } from "@sandtree/host";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFakeInternet, type FakeInternet, fakeInternetUnavailableReason } from "./network/fake-internet.js";
import { type HostServer, startHostServer } from "./network/host-server.js";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const CLI = path.join(ROOT, "packages/cli/dist/main.js");
const unavailable = fakeInternetUnavailableReason();

/** The shell lines of the first ```sh block under "## Using it", continuation lines joined. */
export function usageLines(readme: string): string[] {
  const section = readme.slice(readme.indexOf("## Using it"));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? "";
  return block
    .replace(/\\\n/g, " ")
    .split("\n")
    .filter((l) => l.trim() !== "");
}

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

const SB_ID = /^sb-[a-z2-7]{16}$/;
const ids = (r: Result) => r.stdout.trim().split("\n");

/** What each README line must print; each line must match exactly one pattern. */
const EXPECT: Array<[RegExp, (r: Result, work: string) => void]> = [
  [/^id=\$\(sandtree sandbox create sandtree\/debian/, (r) => expect(r.stdout).toBe("")],
  [/ run \$id -- python3 -c 'print\(6\*7\)'/, (r) => expect(r.stdout).toBe("42\n")],
  [/ upload \$id \.\/data\.csv \/root\/data\.csv/, (r) => expect(r.stdout).toBe("/root/data.csv\n")],
  [
    / download \$id \/root\/data\.csv \.\/back\.csv/,
    (r, work) => {
      expect(r.stdout).toBe("./back.csv\n");
      expect(readFileSync(path.join(work, "back.csv"), "utf8")).toBe(readFileSync(path.join(work, "data.csv"), "utf8"));
    },
  ],
  [/ checkpoint create \$id --wait/, (r) => expect(r.stdout).toMatch(/^ck-[0-9a-f]{20}\n$/)],
  [/^child=\$\(sandtree sandbox fork \$id\)/, (r) => expect(r.stdout).toBe("")],
  [/^job=\$\(sandtree sandbox job start \$id/, (r) => expect(r.stdout).toBe("")],
  [/ job logs \$id \$job --follow/, (r) => expect(r.stdout).toBe("trained\n")],
  [/ create sandtree\/debian --allow .* --label run=42 .*--tunnel llm=/, (r) => expect(ids(r)[0]).toMatch(SB_ID)],
  [
    / network \$id --deny 203\.0\.113\.0\/24/,
    (r) => {
      expect(r.stdout).toMatch(/^mode: +denylist$/m);
      expect(r.stdout).toMatch(/^denylist: +203\.0\.113\.0\/24$/m);
    },
  ],
  [
    / expose \$id 8080/,
    (r) => {
      expect(r.stdout).toMatch(/^url: +http:\/\/127\.0\.0\.1:\d+\/ports\/sb-[a-z2-7]{16}\/8080\/$/m);
      expect(r.stdout).toMatch(/^token: +\S+$/m);
      expect(r.stderr).toContain("shown only now");
    },
  ],
  [/ port-forward \$id 5432 --local 15432/, (r) => expect(r.stdout).toBe("127.0.0.1:15432\n")],
  [/^dock=\$\(sandtree sandbox create sandtree\/docker --wait\)/, (r) => expect(r.stdout).toBe("")],
  [/ run \$dock -- sh -c 'until docker info/, (r) => expect(r.stdout).toMatch(/^\d+\.\d+\.\d+\S*\n$/)],
  [/^desk=\$\(sandtree sandbox create sandtree\/desktop --wait\)/, (r) => expect(r.stdout).toBe("")],
  [
    / desktop info \$desk/,
    (r) => {
      expect(r.stdout).toMatch(/^display: +1280x800$/m);
      expect(r.stdout).toMatch(/^running: +true$/m);
    },
  ],
  [/ delete \$dock \$desk -y$/, (r) => expect(ids(r)).toHaveLength(2)],
  [/ delete \$child \$id -y$/, (r) => expect(ids(r)).toHaveLength(2)],
  [/ delete --label run=42 -y/, (r) => expect(ids(r)).toHaveLength(1)],
  [
    / image pull localhost:5000\/team\/tool:1\.2/,
    (r) => expect(r.stdout).toMatch(/^localhost:5000\/team\/tool:1\.2 sha256:[0-9a-f]{64}\n$/),
  ],
  [
    / image alias python:3\.11-slim sandtree\/debian/,
    (r) => expect(r.stdout).toBe("python:3.11-slim -> sandtree/debian:latest\n"),
  ],
  [
    / team create research && sandtree key create --team research/,
    (r) => {
      expect(r.stdout).toMatch(/^research \S+\n/);
      expect(r.stdout).toMatch(/^admin: +false$/m);
      expect(r.stdout).toMatch(/^key: +st_\S+$/m);
    },
  ],
];

describe.skipIf(unavailable !== null)(`README "Using it"${unavailable ? ` (skipped: ${unavailable})` : ""}`, () => {
  let inet: FakeInternet;
  let server: HostServer;
  let serverOut = "";
  let work: string;
  let bin: string;
  const lines = usageLines(readFileSync(path.join(ROOT, "README.md"), "utf8"));

  beforeAll(async () => {
    work = mkdtempSync(path.join(tmpdir(), "sandtree-readme-"));
    bin = path.join(work, "bin");
    mkdirSync(bin);
    writeFileSync(path.join(bin, "sandtree"), `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
    chmodSync(path.join(bin, "sandtree"), 0o755);
    writeFileSync(path.join(work, "data.csv"), "a,b\n1,2\n");
    inet = await createFakeInternet();
    server = await startHostServer(inet, {}, { onStdout: (d) => (serverOut += d) });
    await startRegistryWithTool(inet, work);
  }, 300_000);

  afterAll(async () => {
    // Stopping the server (SIGTERM, by close()) ends whatever sandboxes a failed line left.
    await inet?.close();
    server?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  }, 120_000);

  it("every line has an expectation, and the server says what the README says it prints", async () => {
    const commands = lines.filter((l) => !l.startsWith("#") && !l.startsWith("sandtree serve"));
    for (const line of commands)
      expect(
        EXPECT.filter(([re]) => re.test(line)),
        line,
      ).toHaveLength(1);
    // The commented output under `serve`: each line's label ("export SANDTREE_API_KEY=", "accelerator: ") appears.
    for (const comment of lines.filter((l) => /^# {3}\S/.test(l))) {
      const label = /^# {3}(\S+ \S+=|[^:]+: )/.exec(comment)?.[1];
      expect(label, comment).toBeDefined();
      expect(serverOut, comment).toContain(label);
    }
    expect(serverOut).toMatch(/^accelerator: (kvm|tcg) \(.+\)$/m);
    expect(serverOut).toMatch(/^sandbox networks: on$/m);
  });

  it("runs every line in order, each printing what it should", { timeout: 900_000 }, async () => {
    const state = path.join(work, "state.sh");
    writeFileSync(state, "");
    const env = {
      ...process.env,
      PATH: `${bin}:${process.env.PATH}`,
      SANDTREE_API_URL: server.base,
      SANDTREE_API_KEY: server.key(),
    };
    for (const line of lines) {
      if (line.startsWith("#") || line.startsWith("sandtree serve")) continue;
      const assigned = /^(\w+)=\$\(/.exec(line)?.[1];
      const script = [
        "set -o pipefail",
        `. ${state}`,
        line,
        "rc=$?",
        ...(assigned ? [`printf '%s=%q\\n' ${assigned} "$${assigned}" >> ${state}`, `printf '%s\\n' "$${assigned}"`] : []),
        "exit $rc",
      ].join("\n");
      const longRunning = line.includes(" port-forward ");
      const r = await runLine(script, work, env, longRunning);
      expect(r.code, `${line}\n${r.stderr}`).toBe(0);
      const check = EXPECT.find(([re]) => re.test(line))?.[1];
      // For `x=$(...)` lines the test prints the variable: check the id it holds.
      if (assigned) {
        expect(r.stdout.trim(), line).toMatch(assigned === "job" ? /^job-[0-9a-f]{16}$/ : SB_ID);
        check?.({ ...r, stdout: "" }, work);
      } else {
        check?.(r, work);
      }
    }
  });
});

/** Runs one line under bash; a long-running one (port-forward) gets SIGINT once it printed a line. */
function runLine(script: string, cwd: string, env: NodeJS.ProcessEnv, longRunning: boolean): Promise<Result> {
  return new Promise((resolve) => {
    const child: ChildProcess = spawn("bash", ["-c", script], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
      // Ctrl-C reaches the CLI (bash's child: the `sandtree` shim execs node), not bash.
      if (longRunning && stdout.includes("\n") && child.pid) {
        for (const pid of execFileSync("pgrep", ["-P", String(child.pid)], { encoding: "utf8" })
          .split("\n")
          .filter(Boolean)) {
          process.kill(Number(pid), "SIGINT");
        }
      }
    });
    child.stderr?.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Debian's docker-registry on localhost:5000 of the server's namespace, holding a tiny
 * team/tool:1.2 pushed with skopeo: what the README's `image pull` line asks for.
 */
async function startRegistryWithTool(inet: FakeInternet, work: string): Promise<void> {
  const dir = path.join(work, "registry");
  mkdirSync(dir);
  writeFileSync(
    path.join(dir, "config.yml"),
    `version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/data\nhttp:\n  addr: 127.0.0.1:5000\n`,
  );
  inet.spawnInHost("docker-registry", ["serve", path.join(dir, "config.yml")], { stdio: "ignore" });
  const rootfs = path.join(work, "tool-rootfs");
  mkdirSync(path.join(rootfs, "etc"), { recursive: true });
  writeFileSync(path.join(rootfs, "etc/tool-version"), "1.2\n");
  const layout = path.join(work, "tool-layout");
  await writeRootfsLayout(rootfs, layout, { refName: "1.2" });
  for (let i = 0; ; i++) {
    const r = await inet.execInHost("skopeo", [
      "copy",
      "--quiet",
      "--dest-tls-verify=false",
      `oci:${layout}:1.2`,
      "docker://localhost:5000/team/tool:1.2",
    ]);
    if (r.code === 0) return;
    if (i >= 50) throw new Error(`could not push team/tool:1.2: ${r.stderr}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

// The client packages as their users get them (#23): packed with `npm pack`, installed into an
// empty directory with nothing of this repository around, then used against a real server.
// Needs `npm run build` first (the packs carry dist); their third-party dependencies come from
// the npm registry (or npm's cache).
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const VERSION = (JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const PACKAGES = ["@sandtree/protocol", "@sandtree/sdk", "@sandtree/cli"];

// Uses the installed SDK only. `create` makes a sandbox and runs a command in it; `delete` ends it.
const SCRIPT = `
import { SandtreeClient, VERSION } from "@sandtree/sdk";
const agents = [];
const fetchSeen = (url, init) => (agents.push(new Headers(init?.headers).get("user-agent")), fetch(url, init));
const client = new SandtreeClient({ fetch: fetchSeen }); // SANDTREE_API_URL / SANDTREE_API_KEY
const [what, id] = process.argv.slice(2);
if (what === "create") {
  const sb = await client.sandboxes.create({ image: "sandtree/busybox", memory_gb: 0.25 });
  await client.sandboxes.waitForCreation(sb.id);
  const r = await client.sandboxes.run(sb.id, "echo hello from $(uname -s)");
  const server = await client.serverVersion();
  console.log(JSON.stringify({ id: sb.id, stdout: r.stdout, exitCode: r.exit_code, sdk: VERSION, server: server.version, agents: [...new Set(agents)] }));
} else {
  const sb = await client.sandboxes.delete(id);
  console.log(JSON.stringify({ id: sb.id, status: sb.status }));
}
`;

let t: TestServer;
let work: string;
let app: string;
const logLines: string[] = [];

/** Without npm's own variables: an npm started by `npm test` must not steer the one we start. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_"))), ...extra };
}

/** Runs a child asynchronously (the server under test shares this event loop). */
function run(cmd: string, args: string[], env = cleanEnv()): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: app, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

const clientEnv = () => cleanEnv({ SANDTREE_API_URL: t.url, SANDTREE_API_KEY: t.key });
const sandtree = (...args: string[]) => run(path.join(app, "node_modules", ".bin", "sandtree"), args, clientEnv());

beforeAll(async () => {
  work = mkdtempSync(path.join(tmpdir(), "sandtree-install-"));
  app = path.join(work, "app");
  mkdirSync(app);
  const packed = JSON.parse(
    execFileSync("npm", ["pack", "--json", "--pack-destination", work, ...PACKAGES.flatMap((p) => ["-w", p])], {
      cwd: ROOT,
      env: cleanEnv(),
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    }),
  ) as Array<{ name: string; filename: string; files: Array<{ path: string }> }>;
  expect(packed.map((p) => p.name).sort()).toEqual([...PACKAGES].sort());
  for (const p of packed) {
    const files = p.files.map((f) => f.path);
    expect(files, p.name).toContain(p.name === "@sandtree/cli" ? "dist/main.js" : "dist/index.js");
    expect(files, p.name).toEqual(expect.arrayContaining(["package.json", "README.md", "LICENSE"]));
    expect(
      files.filter((f) => f.startsWith("test/") || f.endsWith(".tsbuildinfo")),
      p.name,
    ).toEqual([]);
  }
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "install-test", private: true, type: "module" }));
  writeFileSync(path.join(app, "smoke.mjs"), SCRIPT);
  const tarballs = packed.map((p) => path.join(work, p.filename));
  const installed = await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", ...tarballs]);
  expect(installed.code, installed.stderr).toBe(0);
  t = await startTestServer({ logStream: { write: (line: string) => logLines.push(line) } });
}, 180_000);

afterAll(async () => {
  await t?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("the client packages installed on their own (#23)", () => {
  it("hold only themselves and their registry dependencies", () => {
    const tree = JSON.parse(readFileSync(path.join(app, "node_modules", ".package-lock.json"), "utf8")) as {
      packages: Record<string, unknown>;
    };
    const sandtreePackages = Object.keys(tree.packages).filter((p) => p.includes("@sandtree/"));
    // No server, host, better-sqlite3 or fastify: the CLI's client commands do not need them.
    expect(sandtreePackages.sort()).toEqual(PACKAGES.map((p) => `node_modules/${p}`).sort());
    expect(Object.keys(tree.packages).filter((p) => /better-sqlite3|fastify/.test(p))).toEqual([]);
  });

  it("the installed SDK creates a sandbox, runs a command and deletes it; the installed CLI lists it", async () => {
    const created = await run(process.execPath, ["smoke.mjs", "create"], clientEnv());
    expect(created.code, created.stderr).toBe(0);
    const out = JSON.parse(created.stdout) as {
      id: string;
      stdout: string;
      exitCode: number;
      sdk: string;
      server: string;
      agents: string[];
    };
    expect(out).toMatchObject({ stdout: "hello from Linux\n", exitCode: 0, sdk: VERSION, server: VERSION });
    expect(out.agents).toEqual([`sandtree-sdk/${VERSION} node/${process.versions.node}`]);

    const listed = await sandtree("sandbox", "list");
    expect(listed.code, listed.stderr).toBe(0);
    const row = listed.stdout.split("\n").find((l) => l.startsWith(out.id));
    expect(row, listed.stdout).toMatch(/\bRUNNING\b/);

    const deleted = await run(process.execPath, ["smoke.mjs", "delete", out.id], clientEnv());
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(JSON.parse(deleted.stdout)).toMatchObject({ id: out.id });
    const after = await sandtree("sandbox", "list", "--status", "RUNNING", "-o", "json");
    expect(after.code, after.stderr).toBe(0);
    expect(after.stdout).not.toContain(out.id);
  });

  it("sandtree --version, GET /v1/version and /healthz agree with package.json", async () => {
    const v = await sandtree("--version");
    expect(v).toMatchObject({ code: 0, stdout: `${VERSION}\n` });
    const res = await fetch(`${t.url}/v1/version`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ version: VERSION });
    expect(await (await fetch(`${t.url}/healthz`)).json()).toEqual({ ok: true, version: VERSION });
    const doc = (await (await fetch(`${t.url}/v1/openapi.json`)).json()) as { info: { version: string } };
    expect(doc.info.version).toBe(VERSION);
  });

  it("sandtree serve and setup say what they need when installed without the server", async () => {
    const serve = await sandtree("serve");
    expect(serve.code).toBe(1);
    expect(serve.stderr).toMatch(/^error: SERVER_NOT_AVAILABLE: .*@sandtree\/server.*scripts\/setup\.sh/);
    const setup = await sandtree("setup");
    expect(setup.code).toBe(1);
    expect(setup.stderr).toMatch(/^error: SETUP_NOT_AVAILABLE: .*clone.*scripts\/setup\.sh/);
  });

  it("the server warns, once, when a client's User-Agent names a newer sandtree", async () => {
    const warnings = () =>
      logLines
        .map((l) => JSON.parse(l) as { level: number; msg: string; clientVersion?: string })
        .filter((l) => l.level === 40 && l.clientVersion !== undefined);
    const call = (ua: string) => fetch(`${t.url}/v1/version`, { headers: { "user-agent": ua } }).then((r) => r.arrayBuffer());
    await call(`sandtree-sdk/${VERSION} node/20.0.0`);
    await call("sandtree-cli/0.0.1 sandtree-sdk/0.0.1 node/20.0.0");
    expect(warnings()).toEqual([]);
    await call("sandtree-cli/99.0.0 sandtree-sdk/99.0.0 node/22.0.0");
    await call("sandtree-sdk/99.0.0 node/22.0.0");
    expect(warnings().map((w) => [w.clientVersion, w.msg])).toEqual([
      [
        "99.0.0",
        `a client of sandtree 99.0.0 is newer than this server (${VERSION}); upgrade the server, or use a client of ${VERSION}`,
      ],
    ]);
  });
});

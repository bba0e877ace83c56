// Every E2B route and RPC served is listed in docs/e2b.md, and what sandtree cannot do is
// refused in E2B's shape, through the real `e2b` SDK (no VM needed).
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { AuthenticationError, Sandbox, SandboxError, Volume } from "e2b";
import { describe, expect, it } from "vitest";
import { serverForFile } from "../helpers.js";

const DOC = readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), "../../../../docs/e2b.md"), "utf8");

const t = serverForFile();

/** `METHOD /e2b/...` as docs/e2b.md writes it: path parameters as `{name}`. */
const documented = (route: string) => route.replace(/:(\w+)/g, "{$1}");

describe("docs/e2b.md lists the E2B API as served", () => {
  it("every route and RPC served under /e2b is in docs/e2b.md, and every one listed is served", () => {
    const served = t.server.app.e2bRoutes;
    expect(served).toContain("POST /e2b/process.Process/Start");
    expect(served).toContain("POST /e2b/v2/sandboxes");
    expect(served.filter((r) => !DOC.includes(`\`${documented(r)}\``))).toEqual([]);
    const listed = [...DOC.matchAll(/^\| `(GET|POST|PUT|DELETE) (\/e2b\/[^`]+)`/gm)].map((m) => `${m[1]} ${m[2]}`);
    expect(listed.length).toBeGreaterThan(30);
    expect(listed.filter((r) => !served.map(documented).includes(r))).toEqual([]);
  });
});

describe("the e2b SDK's refusals on sandtree", () => {
  const opts = () => ({ apiKey: t.key, apiUrl: `${t.url}/e2b`, sandboxUrl: `${t.url}/e2b` });

  it("volumes are refused with E2B's error shape, naming what is missing", async () => {
    const mount = () =>
      Sandbox.create("sandtree/busybox", { ...opts(), volumeMounts: { "/data": "vol" } }).catch((e: unknown) => e);
    // Checked where every create's volumes are: a volume the team lacks is 404, one it has cannot be mounted yet.
    expect(String(((await mount()) as Error).message)).toMatch(/^404: VOLUME_NOT_FOUND: volume vol not found/);
    expect((await t.api("POST", "/v1/volumes", { name: "vol", size_gb: 1 })).status).toBe(201);
    const err = await mount();
    expect(err).toBeInstanceOf(SandboxError);
    expect(String((err as Error).message)).toMatch(/^501: NOT_SUPPORTED: volumes cannot be mounted in sandboxes on this server/);
    await expect(Volume.create("vol", opts())).rejects.toThrow(/NOT_SUPPORTED: volumes \(not available yet\)/);
    const raw = await fetch(`${t.url}/e2b/volumes`, { headers: { "x-api-key": t.key } });
    expect(raw.status).toBe(501);
    expect(await raw.json()).toEqual({ code: 501, message: expect.stringMatching(/^NOT_SUPPORTED: volumes/) });
  });

  it("a wrong key is the SDK's authentication error; an unknown route is 404 in E2B's shape", async () => {
    await expect(Sandbox.list({ ...opts(), apiKey: "st_wrong" }).nextItems()).rejects.toBeInstanceOf(AuthenticationError);
    const raw = await fetch(`${t.url}/e2b/templates`, { headers: { "x-api-key": t.key } });
    expect(raw.status).toBe(404);
    expect(((await raw.json()) as { code: number }).code).toBe(404);
  });

  it("a daemon call without the sandbox's access token is refused", async () => {
    const res = await fetch(`${t.url}/e2b/files?path=/etc/hostname`, {
      headers: { "e2b-sandbox-id": "sb-aaaaaaaaaaaaaaaa", "x-access-token": "sbt_forged" },
    });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { message: string }).message).toMatch(/^UNAUTHORIZED: /);
  });
});

import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// One reverse proxy in the server (routes/proxy/), checked on the sources: the hop-by-hop list, the
// hand-written status line and the upstream requests live there only, and the fleet proxy holds no
// list of routes (each route declares where fleet mode answers it: routes/fleet-route.ts).

const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../src");

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((e) => {
    const p = path.join(dir, e);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith(".ts") ? [p] : [];
  });
}

const all = sources(src).map((p) => ({ rel: path.relative(src, p), text: readFileSync(p, "utf8") }));
const where = (re: RegExp) => all.filter((f) => re.test(f.text)).map((f) => f.rel);

describe("one reverse proxy", () => {
  it("writes a raw status line, lists hop-by-hop headers and opens HTTP requests upstream in routes/proxy/ only", () => {
    expect(where(/HTTP\/1\.1 /)).toEqual(["routes/proxy/reverse-proxy.ts"]);
    expect(where(/"proxy-connection"|"keep-alive",/)).toEqual(["routes/proxy/forward-headers.ts"]);
    expect(where(/\bhttps?\.request\b|\brequest as https?Request\b/)).toEqual(["routes/proxy/reverse-proxy.ts"]);
  });

  it("leaves the fleet proxy without a list of routes: the routes declare it", () => {
    const proxy = all.find((f) => f.rel === "routes/worker-proxy.ts")?.text ?? "";
    expect(proxy).not.toMatch(/"(GET|POST|DELETE|PUT|PATCH) \/v1\//);
    expect(proxy).not.toMatch(/new Set\(\[/);
    const declared = where(/\b(ANSWERED_HERE|PORT_URLS|WAY_IN), /).sort();
    expect(declared).toEqual([
      "routes/checkpoint-routes.ts",
      "routes/pause-routes.ts",
      "routes/port-routes.ts",
      "routes/sandbox-routes.ts",
    ]);
  });
});

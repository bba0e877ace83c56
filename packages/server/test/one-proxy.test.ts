import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// One reverse proxy in the server (routes/proxy/), checked on the sources: the hop-by-hop list, the
// hand-written status line and the upstream requests live there only; there is no fleet proxy (a
// worker's sandboxes are reached through its host's bundle) and so no list of routes answered here.

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

  it("has no fleet proxy and no list of routes answered here: a worker's sandboxes go through its host's bundle", () => {
    expect(all.map((f) => f.rel).filter((rel) => /worker-proxy|worker-ports|fleet-route\.ts$/.test(rel))).toEqual([]);
    expect(where(/\b(ANSWERED_HERE|PORT_URLS|WAY_IN)\b/)).toEqual([]);
  });
});

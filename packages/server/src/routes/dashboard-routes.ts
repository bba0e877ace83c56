import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { FastifyInstance } from "fastify";

// The web dashboard (packages/dashboard): a static bundle built by `npm run build`, served at `/`
// with its two assets under /dashboard/. The pages need no key; the browser sends one to /v1/*.

const ASSETS: Record<string, string> = {
  "index.html": "text/html; charset=utf-8",
  "app.js": "text/javascript; charset=utf-8",
  "app.css": "text/css; charset=utf-8",
};

const HEADERS = {
  "cache-control": "no-cache",
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

/** The bundle's files, or null when the dashboard package is missing or was not built. */
function loadBundle(): Map<string, Buffer> | null {
  try {
    const pkg = createRequire(import.meta.url).resolve("@sandtree/dashboard/package.json");
    const dist = path.join(path.dirname(pkg), "dist");
    return new Map(Object.keys(ASSETS).map((f) => [f, readFileSync(path.join(dist, f))]));
  } catch {
    return null;
  }
}

export function dashboardRoutes(app: FastifyInstance): void {
  const bundle = loadBundle();
  const send = (file: string) => async (_req: unknown, reply: import("fastify").FastifyReply) => {
    const body = bundle?.get(file);
    if (!body) {
      return reply
        .status(503)
        .type("text/plain; charset=utf-8")
        .send("The dashboard was not built: run `npm run build` in the sandtree checkout, then restart the server.\n");
    }
    return reply
      .headers(HEADERS)
      .type(ASSETS[file] ?? "application/octet-stream")
      .send(body);
  };
  app.get("/", send("index.html"));
  app.get("/dashboard/app.js", send("app.js"));
  app.get("/dashboard/app.css", send("app.css"));
}

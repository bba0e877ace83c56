import { describe, expect, it } from "vitest";
import { serverForFile } from "./helpers.js";

const t = serverForFile();

type Doc = { paths: Record<string, Record<string, { summary?: string }>> };

describe("GET /v1/openapi.json (#21 item 5)", () => {
  it("describes every route the server registered, and only those", async () => {
    const doc = (await (await fetch(`${t.url}/v1/openapi.json`)).json()) as Doc;
    const ops = Object.entries(doc.paths).flatMap(([p, methods]) => Object.entries(methods).map(([m, op]) => ({ p, m, op })));
    // A route served without an entry in OPERATIONS shows up as "(undocumented)".
    expect(ops.filter((o) => !o.op.summary || o.op.summary === "(undocumented)").map((o) => `${o.m} ${o.p}`)).toEqual([]);
    // Each documented operation is a route fastify really has.
    for (const { p, m } of ops) {
      const url = p.replace(/\{path\}$/, "*").replace(/\{(\w+)\}/g, ":$1");
      expect(t.server.app.hasRoute({ method: m.toUpperCase() as "GET", url }), `${m} ${p}`).toBe(true);
    }
    const keys = new Set(ops.map((o) => `${o.m.toUpperCase()} ${o.p}`));
    for (const want of [
      "POST /v1/sandboxes/{id}/checkpoints",
      "GET /v1/sandboxes/{id}/checkpoints",
      "GET /v1/checkpoints",
      "GET /v1/checkpoints/{cid}",
      "DELETE /v1/checkpoints/{cid}",
      "POST /v1/sandboxes/{id}/fork",
      "POST /v1/sandboxes/{id}/pause",
      "POST /v1/sandboxes/{id}/resume",
      "POST /v1/sandboxes/{id}/reset",
      "GET /v1/sandboxes/{id}/pty",
      "GET /tcp/{id}/{port}",
    ]) {
      expect(keys, want).toContain(want);
    }
  });

  it("names the path parameters of every templated path", async () => {
    const doc = (await (await fetch(`${t.url}/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { parameters: Array<{ name: string; in: string }> }>>;
    };
    for (const [p, methods] of Object.entries(doc.paths)) {
      const names = [...p.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      for (const [m, op] of Object.entries(methods)) {
        expect(
          op.parameters.filter((x) => x.in === "path").map((x) => x.name),
          `${m} ${p}`,
        ).toEqual(names);
      }
    }
  });
});

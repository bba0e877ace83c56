import { describe, expect, it } from "vitest";
import { prettyLine, prettyLogStream, resolveLogFormat } from "../src/services/observability/log-format.js";

describe("serve log format", () => {
  it("is readable on a terminal and JSON otherwise, unless chosen", () => {
    expect(resolveLogFormat("auto", true)).toBe("pretty");
    expect(resolveLogFormat("auto", false)).toBe("json");
    expect(resolveLogFormat("json", true)).toBe("json");
    expect(resolveLogFormat("pretty", false)).toBe("pretty");
  });

  it("writes one line per request, from its completion", () => {
    const time = Date.UTC(2026, 11, 3, 13, 12, 10, 123);
    const base = { level: 30, time, pid: 1, hostname: "h", reqId: "req-1" };
    const incoming = JSON.stringify({ ...base, req: { method: "POST", url: "/v1/sandboxes" }, msg: "incoming request" });
    const done = JSON.stringify({ ...base, res: { statusCode: 201 }, responseTime: 12.4, msg: "request completed" });
    const requests = new Map<string, string>();
    expect(prettyLine(incoming, requests)).toBeNull();
    // Fastify's completion line carries no req: the method and URL come from the request's first line.
    expect(prettyLine(done, requests)).toBe("13:12:10.123 INFO  POST /v1/sandboxes 201 12ms");
    expect(requests.size).toBe(0);
  });

  it("keeps a line's own fields and levels, and passes through what is not JSON", () => {
    const warn = JSON.stringify({ level: 40, time: 0, msg: "sandboxes get no network", reason: "not root" });
    expect(prettyLine(warn)).toBe('00:00:00.000 WARN  sandboxes get no network  reason="not root"');
    expect(prettyLine("plain text\n")).toBe("plain text");
  });

  it("splits chunks into lines", () => {
    const out: string[] = [];
    const s = prettyLogStream({ write: (x: string) => out.push(x) });
    const line = JSON.stringify({ level: 50, time: 0, msg: "boom" });
    s.write(line.slice(0, 5));
    expect(out).toEqual([]);
    s.write(`${line.slice(5)}\n${line}\n`);
    expect(out).toEqual(["00:00:00.000 ERROR boom\n", "00:00:00.000 ERROR boom\n"]);
  });
});

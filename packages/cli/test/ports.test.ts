import { describe, expect, it } from "vitest";
import { startCli as cli, recorded } from "./stub-cli.js";

const exposed = {
  sandbox_id: "sb-1",
  port: 8080,
  url: "http://127.0.0.1:7070/ports/sb-1/8080/",
  tcp_url: "ws://127.0.0.1:7070/tcp/sb-1/8080",
  created_at: new Date().toISOString(),
};

describe("port commands", () => {
  it("expose prints the URLs and the token (and --json the answer); unexpose; list-ports", async () => {
    const calls: unknown[] = [];
    const sandboxes = {
      expose: async (id: string, port: number) => recorded(calls, ["expose", id, port], { ...exposed, token: "tok/en" }),
      unexpose: async (id: string, port: number) => {
        calls.push(["unexpose", id, port]);
      },
      listPorts: async () => [exposed],
    };
    const e = cli(["sandbox", "expose", "sb-1", "8080"], { sandboxes });
    expect(await e.done).toBe(0);
    expect(e.out.text).toBe(
      `url:     ${exposed.url}\ntcp url: ${exposed.tcp_url}\ntoken:   tok/en\nbrowser: ${exposed.url}?sandtree_token=tok%2Fen\n`,
    );
    expect(e.err.text).toContain("shown only now");
    const j = cli(["sandbox", "expose", "sb-1", "8080", "--json"], { sandboxes });
    expect(await j.done).toBe(0);
    expect(JSON.parse(j.out.text)).toEqual({ ...exposed, token: "tok/en" });
    const u = cli(["sandbox", "unexpose", "sb-1", "8080"], { sandboxes });
    expect(await u.done).toBe(0);
    expect(u.out.text).toBe("8080\n");
    expect(calls).toEqual([
      ["expose", "sb-1", 8080],
      ["expose", "sb-1", 8080],
      ["unexpose", "sb-1", 8080],
    ]);
    const l = cli(["sandbox", "list-ports", "sb-1"], { sandboxes });
    expect(await l.done).toBe(0);
    expect(l.out.text).toMatch(/^PORT +URL +TCP URL +AGE\n8080 +http:\/\/127\.0\.0\.1:7070\/ports\/sb-1\/8080\/ +ws:/);
    const bad = cli(["sandbox", "expose", "sb-1", "70000"], { sandboxes });
    expect(await bad.done).toBe(2);
  });

  it("port-forward listens until SIGINT, then closes", async () => {
    let closed = false;
    let options: unknown;
    const sandboxes = {
      portForward: async (_id: string, _port: number, o: unknown) => {
        options = o;
        return {
          host: "127.0.0.1",
          localPort: 15432,
          close: async () => {
            closed = true;
          },
        };
      },
    };
    const run = cli(["sandbox", "port-forward", "sb-1", "5432", "--local", "15432"], { sandboxes });
    while (!run.err.text.includes("forwarding")) await new Promise((r) => setTimeout(r, 5));
    expect(run.out.text).toBe("127.0.0.1:15432\n");
    expect(run.err.text).toBe("forwarding 127.0.0.1:15432 -> sb-1:5432 (Ctrl-C stops)\n");
    expect(options).toMatchObject({ localPort: 15432, host: "127.0.0.1" });
    expect(closed).toBe(false);
    process.emit("SIGINT");
    expect(await run.done).toBe(0);
    expect(closed).toBe(true);
  });
});

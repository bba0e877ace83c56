import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { SandtreeError } from "@sandtree/protocol";
import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectContextKey, mountConnect } from "../src/connect/engine.js";
import { CountRequestSchema, Echo } from "./gen/sandtree/test/v1/echo_pb.js";

interface Caller {
  who: string;
}

const key = connectContextKey<Caller>("test.caller", { who: "" });
let app: FastifyInstance;
let base: string;
// The stream handler waits here after its first message until the client has read it, so a
// server that buffered the stream instead of flushing each message would never finish.
let firstSeen: () => void = () => {};

beforeAll(async () => {
  app = Fastify();
  // A JSON REST route beside the mount, under the same prefix: both must keep working.
  app.get("/gw/:ns/:job/rest", async (req) => ({ rest: true, params: req.params }));
  mountConnect(app, key, {
    prefix: "/gw/:ns/:job",
    services: [Echo],
    async context(req) {
      const { ns, job } = req.params as { ns: string; job: string };
      if (req.headers.authorization !== "Bearer good") throw new SandtreeError("UNAUTHORIZED", "no such key");
      return { who: `${ns}/${job}` };
    },
    routes(router) {
      router.service(Echo, {
        say(req, ctx) {
          return { text: req.text.toUpperCase(), caller: ctx.values.get(key).who };
        },
        async *count(req) {
          for (let n = 1; n <= req.upTo; n++) {
            if (req.failAfter && n > req.failAfter) throw new SandtreeError("SANDBOX_NOT_FOUND", "sandbox sb-x is gone");
            yield { n };
            if (n === 1) await new Promise<void>((resolve) => (firstSeen = resolve));
          }
        },
      });
    },
  });
  base = await app.listen({ port: 0, host: "127.0.0.1" });
});

afterAll(async () => {
  await app.close();
});

function client(opts: { binary: boolean; auth?: string; prefix?: string }) {
  const transport = createConnectTransport({
    baseUrl: `${base}${opts.prefix ?? "/gw/team-a/sb-1"}`,
    httpVersion: "1.1",
    useBinaryFormat: opts.binary,
    interceptors: [
      (next) => async (req) => {
        req.header.set("authorization", opts.auth ?? "Bearer good");
        return next(req);
      },
    ],
  });
  return createClient(Echo, transport);
}

describe("the Connect engine", () => {
  it("answers unary calls in the JSON and the binary codec, with the mount's context", async () => {
    for (const binary of [false, true]) {
      const res = await client({ binary }).say({ text: "hi" });
      expect(res.text).toBe("HI");
      expect(res.caller).toBe("team-a/sb-1");
    }
  });

  it("flushes a server stream message by message", async () => {
    for (const binary of [false, true]) {
      const seen: number[] = [];
      for await (const msg of client({ binary }).count(create(CountRequestSchema, { upTo: 3 }))) {
        seen.push(msg.n);
        if (msg.n === 1) firstSeen();
      }
      expect(seen).toEqual([1, 2, 3]);
    }
  });

  it("refuses a call its context refuses, as the Connect code of sandtree's error", async () => {
    const err = await client({ binary: false, auth: "Bearer bad" })
      .say({ text: "x" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Unauthenticated);
    expect((err as ConnectError).rawMessage).toContain("UNAUTHORIZED");
  });

  it("maps an error inside a stream to its Connect code after the messages before it", async () => {
    const seen: number[] = [];
    let caught: unknown;
    try {
      for await (const msg of client({ binary: true }).count({ upTo: 5, failAfter: 2 })) {
        seen.push(msg.n);
        if (msg.n === 1) firstSeen();
      }
    } catch (e) {
      caught = e;
    }
    expect(seen).toEqual([1, 2]);
    expect((caught as ConnectError).code).toBe(Code.NotFound);
    expect((caught as ConnectError).rawMessage).toBe("SANDBOX_NOT_FOUND: sandbox sb-x is gone");
  });

  it("leaves REST routes under the same prefix alone and answers unknown RPCs 404", async () => {
    const rest = await fetch(`${base}/gw/n/j/rest`);
    expect(await rest.json()).toEqual({ rest: true, params: { ns: "n", job: "j" } });
    const unknown = await fetch(`${base}/gw/n/j/sandtree.test.v1.Echo/Nope`, { method: "POST", body: "{}" });
    expect(unknown.status).toBe(404);
    // What is not an RPC gets sandtree's error shape, not the library's bare 415.
    for (const [method, type] of [
      ["Say", "text/plain"],
      ["Count", "application/json"],
    ]) {
      const res = await fetch(`${base}/gw/n/j/sandtree.test.v1.Echo/${method}`, {
        method: "POST",
        headers: { "content-type": type ?? "" },
        body: "{}",
      });
      expect(res.status).toBe(415);
      expect(await res.json()).toMatchObject({ code: "UNSUPPORTED_MEDIA_TYPE", message: expect.stringContaining("Connect-RPC") });
    }
  });
});

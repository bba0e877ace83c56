// The host's side of the guest protocol against a guest that lies on purpose (root in a guest can
// replace its agent and write anything to the port): malformed and unknown frames are skipped,
// replies of the wrong shape and output past its credit close the connection with a protocol
// violation, and nothing a guest sends throws out of the socket's handler (that would end the
// server). The same attacks from inside a real VM: packages/server/test/hostile/protocol.test.ts.
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { FRAME_MAGIC, FrameType, STREAM_WINDOW_BYTES } from "@sandtree/protocol";
import { afterEach, describe, expect, it } from "vitest";
import { AgentClient } from "../src/agent/agent-client.js";
import { encodeFrame, FrameDecoder } from "../src/agent/frame-codec.js";
import { AgentProtocolError, GuestError } from "../src/agent/guest-error.js";
import { DeadlineError } from "../src/util/deadline.js";

type Attack = (sock: net.Socket, stream: number, type: number) => void;

/** A guest that handshakes and answers pings like the real agent, and answers requests with `attack`. */
async function fakeGuest(attack: Attack, prelude?: (sock: net.Socket) => void) {
  const dir = mkdtempSync(path.join(tmpdir(), "hostile-"));
  const sockPath = path.join(dir, "agent.sock");
  const server = net.createServer((sock) => {
    const dec = new FrameDecoder();
    // Once: after every ACK, a slow host (a loaded machine) would resend its HELLO before reading
    // through the prelude, and never see the ACK of its newest nonce.
    let preluded = false;
    sock.on("error", () => {});
    sock.on("data", (chunk) => {
      for (const f of dec.push(chunk)) {
        if (f.type === FrameType.HELLO) {
          const info = Buffer.from(JSON.stringify({ version: 1, kernel: "6.1.0-fake", boot_ms: 1, root: "mounted" }));
          sock.write(encodeFrame(FrameType.HELLO_ACK, 0, Buffer.concat([f.payload.subarray(0, 16), info])));
          if (!preluded) prelude?.(sock);
          preluded = true;
        } else if (f.type === FrameType.PING) sock.write(encodeFrame(FrameType.PONG, 0, f.payload));
        else if (f.stream !== 0 && f.type !== FrameType.WINDOW && f.type !== FrameType.CANCEL) attack(sock, f.stream, f.type);
      }
    });
  });
  await new Promise<void>((r) => server.listen(sockPath, r));
  const client = await AgentClient.connect(sockPath, { timeoutMs: 10_000 });
  const violations: string[] = [];
  client.on("violation", (reason: string) => violations.push(reason));
  cleanups.push(() => {
    client.close();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { client, violations };
}

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

const json = (v: unknown) => Buffer.from(JSON.stringify(v));
const deep = (n: number) => Buffer.from(`{"pid":${"[".repeat(n)}${"]".repeat(n)}}`);
const header = (type: number, stream: number, len: number) => {
  const h = Buffer.alloc(12);
  h.writeUInt16LE(FRAME_MAGIC, 0);
  h.writeUInt8(type, 2);
  h.writeUInt32LE(stream, 4);
  h.writeUInt32LE(len, 8);
  return h;
};

/** Runs an exec against the fake guest and says how it ended. */
async function execOutcome(client: AgentClient): Promise<unknown> {
  const exec = client.exec({ argv: ["true"] });
  try {
    for await (const _ of exec.events) {
      // not read on purpose until the end
    }
    return await exec.exited;
  } catch (err) {
    return err;
  }
}

describe("a hostile guest agent", () => {
  it("garbage, oversized lengths, unknown types and streams and a HELLO storm are skipped; the connection keeps working", async () => {
    const { client, violations } = await fakeGuest(
      (sock, stream) => {
        sock.write(encodeFrame(FrameType.STARTED, stream, json({ pid: 7 })));
        sock.write(encodeFrame(FrameType.EXIT, stream, json({ exit_code: 0, signal: null, timed_out: false })));
      },
      (sock) => {
        sock.write(Buffer.alloc(256 * 1024, 0xee)); // no magic anywhere
        sock.write(Buffer.concat([header(FrameType.STDOUT, 1, 0xffffffff), Buffer.alloc(64, 1)])); // length past the maximum
        for (let i = 0; i < 2000; i++) {
          sock.write(encodeFrame(0xee, i, Buffer.alloc(8))); // unknown type, any stream
          sock.write(encodeFrame(FrameType.EXIT, 100_000 + i, json({ exit_code: 1 }))); // a stream never opened
          sock.write(encodeFrame(FrameType.HELLO, 0, Buffer.alloc(40))); // HELLO storm
          sock.write(encodeFrame(FrameType.HELLO_ACK, 0, Buffer.alloc(40)));
          sock.write(encodeFrame(FrameType.READY, 0, json({ version: 1 })));
          sock.write(encodeFrame(FrameType.PONG, 0, Buffer.alloc(4096)));
        }
      },
    );
    await client.ping(undefined, { timeoutMs: 10_000 });
    expect(await execOutcome(client)).toEqual({ exit_code: 0, signal: null, timed_out: false });
    expect(violations).toEqual([]);
    expect(client.isClosed).toBe(false);
  });

  const violators: Array<[string, Attack]> = [
    ["a deeply nested STARTED", (s, id) => s.write(encodeFrame(FrameType.STARTED, id, deep(400_000)))],
    [
      "an EXIT of the wrong shape",
      (s, id) => s.write(encodeFrame(FrameType.EXIT, id, json({ exit_code: "0", signal: {}, timed_out: 1 }))),
    ],
    [
      "an EXIT that is not JSON (TLV bytes)",
      (s, id) => s.write(encodeFrame(FrameType.EXIT, id, Buffer.from([1, 0xff, 0xff, 0xff, 0x7f, 0x41]))),
    ],
    ["a WINDOW of two bytes", (s, id) => s.write(encodeFrame(FrameType.WINDOW, id, Buffer.from([1, 2])))],
    [
      "output past its credit",
      (s, id) => {
        const chunk = Buffer.alloc(1024 * 1024, 0x61);
        for (let i = 0; i <= STREAM_WINDOW_BYTES / chunk.length + 1; i++) s.write(encodeFrame(FrameType.STDOUT, id, chunk));
      },
    ],
  ];
  for (const [name, attack] of violators) {
    it(`${name}: the exec fails with a protocol violation and the connection closes`, async () => {
      const { client, violations } = await fakeGuest((sock, stream, type) => {
        if (type !== FrameType.EXEC) return;
        sock.write(encodeFrame(FrameType.STARTED, stream, json({ pid: 7 })));
        attack(sock, stream, type);
      });
      const exec = client.exec({ argv: ["true"] });
      // Nobody reads the events: output past the credit must not pile up in the queue.
      const err = await exec.exited.catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AgentProtocolError);
      expect(violations).toHaveLength(1);
      expect(client.isClosed).toBe(true);
      await expect(client.stat("/")).rejects.toBeInstanceOf(AgentProtocolError);
    });
  }

  it("an exec the guest starts and never ends fails past its timeout, while pings are answered", async () => {
    const { client, violations } = await fakeGuest((sock, stream, type) => {
      if (type === FrameType.EXEC) sock.write(encodeFrame(FrameType.STARTED, stream, json({ pid: 7 })));
    });
    client.execGraceMs = 200;
    const err = await client.exec({ argv: ["sleep", "inf"], timeoutMs: 100 }).exited.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeadlineError);
    await client.ping(undefined, { timeoutMs: 10_000 });
    expect(client.busy).toBe(false);
    expect(violations).toEqual([]);
  });

  it("a stat with a megabyte name, a listing line that is not a stat: protocol violations", async () => {
    for (const reply of [
      encodeFrame(
        FrameType.RESULT,
        0,
        json({ type: "file", size: 1, mode: 420, uid: 0, gid: 0, mtime_ms: 0, name: "x".repeat(1 << 19) }),
      ),
      encodeFrame(FrameType.DATA, 0, Buffer.from('{"type":"file"}\n')),
    ]) {
      const { client, violations } = await fakeGuest((sock, stream) => {
        reply.writeUInt32LE(stream, 4);
        sock.write(reply);
        sock.write(encodeFrame(FrameType.END, stream));
      });
      const call = reply.readUInt8(2) === FrameType.RESULT ? client.stat("/x") : client.list("/");
      await expect(call).rejects.toBeInstanceOf(AgentProtocolError);
      expect(violations).toHaveLength(1);
    }
  });

  it("an ERROR with a megabyte message or of the wrong shape is that request's error, cut short", async () => {
    let n = 0;
    const { client, violations } = await fakeGuest((sock, stream) => {
      const payload = n++ === 0 ? json({ errno: 2, code: "ENOENT", message: "m".repeat(1 << 19) }) : json({ code: { deep: [] } });
      sock.write(encodeFrame(FrameType.ERROR, stream, payload));
    });
    const first = await client.stat("/a").catch((e: unknown) => e);
    expect(first).toBeInstanceOf(GuestError);
    expect((first as GuestError).errnoCode).toBe("ENOENT");
    expect((first as GuestError).message.length).toBeLessThan(1100);
    const second = await client.stat("/b").catch((e: unknown) => e);
    expect((second as GuestError).errnoCode).toBe("EIO");
    expect(violations).toEqual([]);
  });
});

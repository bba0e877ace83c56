import { createHash, randomBytes } from "node:crypto";
import { ExecRecordKind, ExecStreamDecoder, type ExecStreamEvent, encodeExecEvent, execRecordHeader } from "@sandtree/protocol";
import { describe, expect, it } from "vitest";

const started = { type: "started", exec_id: "ex-1", pid: 7 } as const;
const exit = { type: "exit", exit_code: 0, signal: null, timed_out: false, duration_ms: 3 } as const;
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** Feeds `wire` in pieces of the given sizes (cycled) and returns every event and stdout/stderr whole. */
function decode(wire: Buffer, sizes: number[]) {
  const dec = new ExecStreamDecoder();
  const events: ExecStreamEvent[] = [];
  for (let at = 0, i = 0; at < wire.length; i++) {
    const n = sizes[i % sizes.length] as number;
    // A copy per piece, which the test then scribbles over: the decoder must not keep views of it.
    const piece = Buffer.from(wire.subarray(at, at + n));
    for (const ev of dec.push(piece))
      events.push(ev.type === "stdout" || ev.type === "stderr" ? { ...ev, data: Buffer.from(ev.data) } : ev);
    piece.fill(0xee);
    at += n;
  }
  const join = (t: string) => Buffer.concat(events.flatMap((e) => (e.type === t && "data" in e ? [e.data] : [])));
  return { events, stdout: join("stdout"), stderr: join("stderr"), leftover: dec.leftover };
}

describe("binary exec stream", () => {
  const out = randomBytes(300_001);
  const err = randomBytes(4097);
  const wire = Buffer.concat([
    encodeExecEvent(started),
    execRecordHeader(ExecRecordKind.STDOUT, 200_000),
    out.subarray(0, 200_000),
    execRecordHeader(ExecRecordKind.STDERR, err.length),
    err,
    execRecordHeader(ExecRecordKind.STDOUT, 100_001),
    out.subarray(200_000),
    encodeExecEvent(exit),
  ]);

  it.each([[[1]], [[5]], [[4, 1]], [[65_536]], [[7, 65_536, 3, 200_003]], [[wire.length]]])(
    "gives the same events and bytes whatever the chunking (%j)",
    (sizes) => {
      const r = decode(wire, sizes);
      expect(r.events[0]).toEqual(started);
      expect(r.events.at(-1)).toEqual(exit);
      expect(r.events.map((e) => e.type).filter((t, i, a) => t !== a[i - 1])).toEqual([
        "started",
        "stdout",
        "stderr",
        "stdout",
        "exit",
      ]);
      expect(sha(r.stdout)).toBe(sha(out));
      expect(sha(r.stderr)).toBe(sha(err));
      expect(r.leftover).toBe(0);
    },
  );

  it("reports an unfinished record, and refuses unknown kinds, oversized records and bad events", () => {
    expect(decode(wire.subarray(0, wire.length - 2), [1000]).leftover).toBeGreaterThan(0);
    expect(() => new ExecStreamDecoder().push(Uint8Array.from([4, 0, 0, 0, 0]))).toThrow(/kind 4/);
    expect(() => new ExecStreamDecoder().push(execRecordHeader(ExecRecordKind.STDOUT, 0xffffffff))).toThrow(/bytes/);
    const notJson = Buffer.concat([execRecordHeader(ExecRecordKind.EVENT, 2), Buffer.from("{x")]);
    expect(() => new ExecStreamDecoder().push(notJson)).toThrow(/not JSON/);
    const output = Buffer.from(JSON.stringify({ type: "stdout", data: "eA==" }));
    expect(() =>
      new ExecStreamDecoder().push(Buffer.concat([execRecordHeader(ExecRecordKind.EVENT, output.length), output])),
    ).toThrow(/unexpected/);
  });
});

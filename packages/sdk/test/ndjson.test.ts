import { describe, expect, it } from "vitest";
import { NdjsonDecoder } from "../src/index.js";

const enc = (s: string) => new TextEncoder().encode(s);

describe("NdjsonDecoder", () => {
  it("joins lines cut across chunks, in every possible cut", () => {
    const text = '{"a":1}\n{"b":"é€😀"}\r\n\n{"c":3}';
    const bytes = enc(text);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const d = new NdjsonDecoder();
      const lines = [...d.push(bytes.subarray(0, cut)), ...d.push(bytes.subarray(cut)), ...d.end()];
      expect(lines).toEqual(['{"a":1}', '{"b":"é€😀"}', '{"c":3}']);
    }
  });

  it("handles one byte at a time and copies retained bytes", () => {
    const bytes = enc('{"x":"y"}\n{"z":1}\n');
    const d = new NdjsonDecoder();
    const lines: string[] = [];
    const buf = new Uint8Array(1);
    for (const b of bytes) {
      buf[0] = b; // the same buffer reused for every chunk
      lines.push(...d.push(buf));
    }
    lines.push(...d.end());
    expect(lines).toEqual(['{"x":"y"}', '{"z":1}']);
  });

  it("refuses a runaway line", () => {
    const d = new NdjsonDecoder(8);
    expect(() => d.push(enc("0123456789"))).toThrow(/exceeded/);
  });
});

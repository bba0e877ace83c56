import { readFileSync } from "node:fs";
import path from "node:path";
import { deflateSync } from "node:zlib";
import { DesktopEvent } from "@sandtree/protocol";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { decodePng, diffRatio } from "../src/services/desktop/png-diff.js";

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../..");

/** A PNG of RGB rows, each row stored with the given filter byte (data already filtered). */
function png(width: number, height: number, rows: Array<[number, number[]]>): Buffer {
  const chunk = (tag: string, body: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(body.length);
    return Buffer.concat([len, Buffer.from(tag, "latin1"), body, Buffer.alloc(4)]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const raw = Buffer.concat(rows.map(([f, data]) => Buffer.from([f, ...data])));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(raw)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

describe("desktop event schema and screen comparison", () => {
  it("docs/desktop-event.schema.json is the JSON Schema of DesktopEvent (node scripts/desktop-schema.mjs)", () => {
    const documented = JSON.parse(readFileSync(path.join(ROOT, "docs/desktop-event.schema.json"), "utf8"));
    expect(documented).toEqual(
      JSON.parse(JSON.stringify(z.toJSONSchema(DesktopEvent, { io: "output", unrepresentable: "any" }))),
    );
  });

  it("decodes every PNG row filter and counts the pixels that differ beyond the tolerance", () => {
    // 2x2: row 0 unfiltered, row 1 "up" (adds the row above).
    const a = decodePng(
      png(2, 2, [
        [0, [10, 20, 30, 40, 50, 60]],
        [2, [0, 0, 0, 100, 0, 0]],
      ]),
    );
    expect([...a.data]).toEqual([10, 20, 30, 40, 50, 60, 10, 20, 30, 140, 50, 60]);
    // The same pixels through "sub", "average" and "paeth".
    const b = decodePng(
      png(2, 2, [
        [1, [10, 20, 30, 30, 30, 30]],
        [3, [5, 10, 15, 115, 15, 15]],
      ]),
    );
    expect([...b.data.subarray(0, 6)]).toEqual([10, 20, 30, 40, 50, 60]);
    expect([...b.data.subarray(6)]).toEqual([10, 20, 30, 140, 50, 60]);
    const c = decodePng(
      png(2, 2, [
        [4, [10, 20, 30, 30, 30, 30]],
        [0, [10, 20, 33, 140, 50, 60]],
      ]),
    );
    expect(diffRatio(a, c, 0)).toBe(0.25);
    expect(diffRatio(a, c, 3)).toBe(0);
    expect(diffRatio(a, decodePng(png(1, 1, [[0, [1, 2, 3]]])), 255)).toBe(1);
  });
});

import { spawnSync } from "node:child_process";
import path from "node:path";
import type { Machine } from "@sandtree/host";
import { describe, expect, it } from "vitest";
import { HelperSession } from "../src/services/desktop/helper-session.js";
import { decodePng } from "../src/services/desktop/png-diff.js";

// The desktop helper's two ends without a VM: the server's HelperSession reading the answers of
// `sandtree-desktop serve` (lines, and PNG bytes after them), and the helper's PNG encoder
// (scripts/desktop/sandtree_screen.py, run by the host's python3) read back by png-diff.

const DESKTOP_SCRIPTS = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../../scripts/desktop");

/** A guest exec whose stdout the test writes, chunk by chunk, and whose stdin it reads. */
function fakeHelper() {
  const written: string[] = [];
  const queue: Array<Buffer | null> = [];
  let wake: (() => void) | null = null;
  const push = (b: Buffer | null) => {
    queue.push(b);
    wake?.();
  };
  const events = (async function* () {
    for (;;) {
      const b = queue.shift();
      if (b === undefined) {
        await new Promise<void>((r) => {
          wake = r;
        });
        continue;
      }
      if (b === null) return;
      yield { type: "stdout" as const, data: b };
    }
  })();
  const vm = {
    exec: () => ({
      events,
      writeStdin: async (b: Buffer) => {
        written.push(b.toString("utf8"));
      },
      signal: () => push(null),
    }),
  } as unknown as Machine;
  return { vm, written, push };
}

const tick = () => new Promise((r) => setTimeout(r, 5));

describe("desktop helper session", () => {
  it("reads answers split anywhere, a PNG's bytes after its line, and asks PNGs only of a protocol-2 helper", async () => {
    const h = fakeHelper();
    const s = new HelperSession(h.vm, "/usr/local/bin/sandtree-desktop");
    h.push(Buffer.from('{"hello": {"proto'));
    h.push(Buffer.from('col": 2}}\n'));
    await tick();
    expect(s.protocol).toBe(2);
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 10, 13, 0, 255, 10]);
    const pending = s.run('{"type":"screenshot"}', { png: true });
    await tick();
    expect(h.written).toEqual(['{"action":{"type":"screenshot"},"png":true}\n']);
    const line = Buffer.from(`{"exit": 0, "stdout": "{\\"seq\\":1}\\n", "png": ${png.length}}\n`);
    h.push(Buffer.concat([line.subarray(0, 10)]));
    h.push(Buffer.concat([line.subarray(10), png.subarray(0, 3)]));
    h.push(Buffer.concat([png.subarray(3), Buffer.from('{"exit": 4, "stdout": "x"}\n')]));
    expect(await pending).toEqual({ exit_code: 0, stdout: '{"seq":1}\n', png });
    // The next answer was already buffered: it goes to the next action, which asks no PNG.
    expect(await s.run('{"type":"cursor"}')).toEqual({ exit_code: 4, stdout: "x" });
    expect(h.written[1]).toBe('{"type":"cursor"}\n');
    expect(s.answered).toBe(true);
    s.close();
    expect(await s.run('{"type":"cursor"}')).toBeNull();
  });

  it("speaks plain lines to a helper that never said hello, and ends on an unreadable line", async () => {
    const h = fakeHelper();
    const s = new HelperSession(h.vm, "/usr/local/bin/sandtree-desktop");
    const pending = s.run('{"type":"screenshot"}', { png: true });
    await tick();
    expect(h.written).toEqual(['{"type":"screenshot"}\n']);
    h.push(Buffer.from('{"exit": 0, "stdout": "{}"}\n'));
    expect(await pending).toEqual({ exit_code: 0, stdout: "{}" });
    expect(s.protocol).toBe(1);
    const broken = s.run('{"type":"cursor"}');
    h.push(Buffer.from("Traceback (most recent call last):\n"));
    expect(await broken).toBeNull();
    expect(s.alive).toBe(false);
  });
});

describe("desktop helper PNG encoder", () => {
  it("encodes a frame in bands that png-diff decodes to its pixels; the same frame, the same bytes", () => {
    // A 37x41 frame of BGRX pixels (41 rows: bands of 16, 16 and 9), then the same with one pixel
    // changed, encoded by one encoder (its band cache in use) and by a fresh one.
    const code = `
import sys
sys.path.insert(0, sys.argv[1])
import sandtree_screen as ss
w, h = 37, 41
raw = bytes((x * 7 + y * 3 + c * 50) % 256 for y in range(h) for x in range(w) for c in range(4))
changed = bytearray(raw); changed[(30 * w + 5) * 4:(30 * w + 5) * 4 + 3] = bytes([1, 2, 3])
enc = ss.PngEncoder()
a = enc.encode(w, h, w * 4, raw)
b = enc.encode(w, h, w * 4, bytes(changed))
fresh = ss.PngEncoder().encode(w, h, w * 4, bytes(changed))
sys.stdout.write(a.hex() + " " + b.hex() + " " + fresh.hex())
`;
    const r = spawnSync("python3", ["-B", "-S", "-c", code, DESKTOP_SCRIPTS], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    const [a, b, fresh] = r.stdout.split(" ").map((h) => Buffer.from(h, "hex"));
    expect(b?.equals(fresh as Buffer)).toBe(true);
    const img = decodePng(a as Buffer);
    expect({ width: img.width, height: img.height, channels: img.channels }).toEqual({ width: 37, height: 41, channels: 3 });
    const at = (p: typeof img, x: number, y: number) => [...p.data.subarray((y * 37 + x) * 3, (y * 37 + x) * 3 + 3)];
    // BGRX in, RGB out.
    for (const [x, y] of [
      [0, 0],
      [36, 15],
      [5, 16],
      [36, 40],
    ] as const) {
      expect(at(img, x, y)).toEqual([(x * 7 + y * 3 + 100) % 256, (x * 7 + y * 3 + 50) % 256, (x * 7 + y * 3) % 256]);
    }
    const next = decodePng(b as Buffer);
    expect(at(next, 5, 30)).toEqual([3, 2, 1]);
    expect(at(next, 6, 30)).toEqual(at(img, 6, 30));
  });
});

// What a worker takes of an image import streamed to it (ImportLayout): at most its layoutMaxBytes,
// counted as sent and as unpacked, refused past it with PAYLOAD_TOO_LARGE before its host's images
// see anything, and no temporary directory left behind. Over loopback to a FakeHost (no VM).
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { c as tarCreate } from "tar";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { writeRootfsLayout } from "../src/index.js";
import { importRaw } from "./helpers/raw-import.js";
import { type ServedFake, serveFakeHost } from "./helpers/served-fake.js";

const CAP = 1 << 20;
const key = "stw_layout-cap";

describe("remote host: the size of an image import", () => {
  let served: ServedFake;
  let scratch: string;

  beforeAll(async () => {
    served = await serveFakeHost("sandtree-layout-cap-", () => key, { layoutMaxBytes: CAP });
  });

  afterAll(() => served?.close());

  // The worker unpacks into the system's temporary directory: this test's own, to see it emptied.
  beforeEach(() => {
    scratch = mkdtempSync(path.join(served.dir, "tmp-"));
    vi.stubEnv("TMPDIR", scratch);
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  // The worker's layout copies (the fake's image store may keep its own folder beside them).
  const unpackDirs = () => readdirSync(scratch).filter((n) => n.startsWith("sandtree-layout-"));

  /** A layout of one file of `bytes` random bytes, written uncompressed. */
  async function layoutOf(name: string, bytes: number): Promise<string> {
    const rootfs = path.join(served.dir, `${name}-rootfs`);
    mkdirSync(rootfs);
    writeFileSync(path.join(rootfs, name), randomBytes(bytes));
    const layout = path.join(served.dir, `${name}-layout`);
    await writeRootfsLayout(rootfs, layout, { refName: "v1", compression: "none" });
    return layout;
  }

  it("imports a layout under the cap", async () => {
    const layout = await layoutOf("small", 64 << 10);
    const imported = await served.host.images.importLayout(layout, "sandtree/small", { layoutRef: "v1" });
    expect(await served.host.images.resolve("sandtree/small", {})).toMatchObject({ digest: imported.digest });
    expect(unpackDirs()).toEqual([]);
  });

  it("refuses a layout past the cap (PAYLOAD_TOO_LARGE) and removes what it unpacked", async () => {
    const layout = await layoutOf("big", 3 << 20);
    const imports = vi.spyOn(served.fake.images, "importLayout");
    await expect(served.host.images.importLayout(layout, "sandtree/big", { layoutRef: "v1" })).rejects.toMatchObject({
      code: "PAYLOAD_TOO_LARGE",
    });
    expect(imports).not.toHaveBeenCalled();
    imports.mockRestore();
    expect(unpackDirs()).toEqual([]);
  });

  it("counts what a compressed tar unpacks to, not only what it sends", async () => {
    const files = path.join(served.dir, "zeros");
    mkdirSync(files);
    writeFileSync(path.join(files, "zeros"), Buffer.alloc(2 * CAP));
    const chunks: Buffer[] = [];
    for await (const c of tarCreate({ cwd: files, portable: true }, ["."])) chunks.push(c as Buffer);
    const gz = gzipSync(Buffer.concat(chunks));
    expect(gz.length).toBeLessThan(CAP / 8);
    expect(await importRaw(served.worker.url, key, "sandtree/raw", [gz])).toMatchObject({ code: "PAYLOAD_TOO_LARGE" });
    expect(unpackDirs()).toEqual([]);
  });

  it("counts the bytes sent even where they unpack to nothing", async () => {
    // Zero blocks: a tar's end, then padding the parser skips.
    const pieces = Array.from({ length: 4 }, () => new Uint8Array(CAP / 2));
    expect(await importRaw(served.worker.url, key, "sandtree/raw", pieces)).toMatchObject({ code: "PAYLOAD_TOO_LARGE" });
    expect(unpackDirs()).toEqual([]);
  });
});

// What a worker takes of an image import streamed to it (ImportLayout): at most its layoutMaxBytes,
// counted as sent and as unpacked, refused past it with PAYLOAD_TOO_LARGE before its host's images
// see anything, and no temporary directory left behind. Over loopback to a FakeHost (no VM).
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { c as tarCreate } from "tar";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { FakeHost } from "../src/fake.js";
import { writeRootfsLayout } from "../src/index.js";
import { connectRemoteHost, type RemoteHost, type ServedHost, serveMachineHost } from "../src/remote.js";
import { importRaw } from "./helpers/raw-import.js";

const CAP = 1 << 20;
const key = "stw_layout-cap";

describe("remote host: the size of an image import", () => {
  let dir: string;
  let scratch: string;
  let fake: FakeHost;
  let worker: ServedHost;
  let host: RemoteHost;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(process.env.TMPDIR ?? "/tmp", "sandtree-layout-cap-"));
    fake = new FakeHost();
    worker = await serveMachineHost({
      host: fake,
      key: () => key,
      networksDir: path.join(dir, "networks"),
      layoutMaxBytes: CAP,
    });
    host = await connectRemoteHost({ url: worker.url, key });
  });

  afterAll(async () => {
    host?.close();
    await worker?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  // The worker unpacks into the system's temporary directory: this test's own, to see it emptied.
  beforeEach(() => {
    scratch = mkdtempSync(path.join(dir, "tmp-"));
    vi.stubEnv("TMPDIR", scratch);
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  // The worker's layout copies (the fake's image store may keep its own folder beside them).
  const unpackDirs = () => readdirSync(scratch).filter((n) => n.startsWith("sandtree-layout-"));

  /** A layout of one file of `bytes` random bytes, written uncompressed. */
  async function layoutOf(name: string, bytes: number): Promise<string> {
    const rootfs = path.join(dir, `${name}-rootfs`);
    mkdirSync(rootfs);
    writeFileSync(path.join(rootfs, name), randomBytes(bytes));
    const layout = path.join(dir, `${name}-layout`);
    await writeRootfsLayout(rootfs, layout, { refName: "v1", compression: "none" });
    return layout;
  }

  it("imports a layout under the cap", async () => {
    const layout = await layoutOf("small", 64 << 10);
    const imported = await host.images.importLayout(layout, "sandtree/small", { layoutRef: "v1" });
    expect(await host.images.resolve("sandtree/small", {})).toMatchObject({ digest: imported.digest });
    expect(unpackDirs()).toEqual([]);
  });

  it("refuses a layout past the cap (PAYLOAD_TOO_LARGE) and removes what it unpacked", async () => {
    const layout = await layoutOf("big", 3 << 20);
    const imports = vi.spyOn(fake.images, "importLayout");
    await expect(host.images.importLayout(layout, "sandtree/big", { layoutRef: "v1" })).rejects.toMatchObject({
      code: "PAYLOAD_TOO_LARGE",
    });
    expect(imports).not.toHaveBeenCalled();
    imports.mockRestore();
    expect(unpackDirs()).toEqual([]);
  });

  it("counts what a compressed tar unpacks to, not only what it sends", async () => {
    const files = path.join(dir, "zeros");
    mkdirSync(files);
    writeFileSync(path.join(files, "zeros"), Buffer.alloc(2 * CAP));
    const chunks: Buffer[] = [];
    for await (const c of tarCreate({ cwd: files, portable: true }, ["."])) chunks.push(c as Buffer);
    const gz = gzipSync(Buffer.concat(chunks));
    expect(gz.length).toBeLessThan(CAP / 8);
    expect(await importRaw(worker.url, key, "sandtree/raw", [gz])).toMatchObject({ code: "PAYLOAD_TOO_LARGE" });
    expect(unpackDirs()).toEqual([]);
  });

  it("counts the bytes sent even where they unpack to nothing", async () => {
    // Zero blocks: a tar's end, then padding the parser skips.
    const pieces = Array.from({ length: 4 }, () => new Uint8Array(CAP / 2));
    expect(await importRaw(worker.url, key, "sandtree/raw", pieces)).toMatchObject({ code: "PAYLOAD_TOO_LARGE" });
    expect(unpackDirs()).toEqual([]);
  });
});

import { existsSync, lstatSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyLayer, applyLayers } from "../src/images/layers.js";
import { OciLayoutSource } from "../src/images/oci-layout.js";
import { writeOciLayout } from "../src/images/oci-layout-writer.js";
import { makeTree, run } from "./helpers/registry.js";

interface Member {
  name: string;
  type?: "file" | "dir" | "symlink" | "hardlink";
  linkname?: string;
  content?: string;
}

/** Crafts a tar byte-for-byte with Python's tarfile: GNU tar refuses to write hostile names. */
async function craftTar(path: string, members: Member[]): Promise<string> {
  const script = `
import tarfile, io, json, sys
t = tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT)
for m in json.loads(sys.argv[2]):
    ti = tarfile.TarInfo(m["name"])
    kind = m.get("type", "file")
    ti.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE}[kind]
    ti.linkname = m.get("linkname", "")
    ti.mode = 0o755 if kind == "dir" else 0o644
    data = m.get("content", "").encode()
    ti.size = len(data) if kind == "file" else 0
    t.addfile(ti, io.BytesIO(data) if kind == "file" else None)
t.close()
`;
  await run(["python3", "-c", script, path, JSON.stringify(members)]);
  return path;
}

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "sandtree-layers-"));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

async function fresh(name: string): Promise<{ rootfs: string; outside: string; work: string }> {
  const base = join(scratch, name);
  const rootfs = join(base, "rootfs");
  const outside = join(base, "outside");
  const work = join(base, "work");
  await mkdir(rootfs, { recursive: true });
  await mkdir(outside, { recursive: true });
  await mkdir(work, { recursive: true });
  return { rootfs, outside, work };
}

describe("applyLayers", () => {
  it("applies gzip, zstd and plain layers with whiteouts, opaque dirs, owners and modes", async () => {
    const l1 = await makeTree(join(scratch, "l1"), {
      "etc/hostname": "base",
      "etc/secret": { content: "s3cret", mode: 0o640, uid: 1234, gid: 5678 },
      "bin/tool": { content: "#!/bin/sh\n", mode: 0o4755 },
      "opq/old1": "1",
      "opq/sub/old2": "2",
      "gone.txt": "bye",
      "dir/keep": "k",
      "usr/lib/libx": "x",
      lib: { symlink: "usr/lib" },
    });
    const l2 = await makeTree(join(scratch, "l2"), {
      ".wh.gone.txt": "",
      "opq/.wh..wh..opq": "",
      "opq/new": "n",
      "etc/hostname": "upper",
    });
    const l3 = await makeTree(join(scratch, "l3"), { "dir/.wh.keep": "", "dir/added": "a", "late.txt": "late" });
    const layout = join(scratch, "layout");
    await writeOciLayout(
      layout,
      [
        {
          layers: [
            { dir: l1, compression: "gzip" },
            { dir: l2, compression: "zstd" },
            { dir: l3, compression: "none" },
          ],
        },
      ],
      { refName: "v1" },
    );
    const source = new OciLayoutSource(layout);
    const { manifest } = await source.resolveManifest("v1");
    expect(manifest.layers.map((l) => l.mediaType)).toEqual([
      "application/vnd.oci.image.layer.v1.tar+gzip",
      "application/vnd.oci.image.layer.v1.tar+zstd",
      "application/vnd.oci.image.layer.v1.tar",
    ]);
    const { rootfs, work } = await fresh("stack");
    const paths: string[] = [];
    for (const [i, layer] of manifest.layers.entries()) {
      const p = join(work, `blob${i}`);
      await source.fetchBlob(layer, p);
      paths.push(p);
    }
    await applyLayers(paths, rootfs, { workDir: work });
    expect(readFileSync(join(rootfs, "etc/hostname"), "utf8")).toBe("upper");
    expect(existsSync(join(rootfs, "gone.txt"))).toBe(false);
    expect(readdirSync(join(rootfs, "opq"))).toEqual(["new"]);
    expect(readdirSync(join(rootfs, "dir"))).toEqual(["added"]);
    expect(readFileSync(join(rootfs, "late.txt"), "utf8")).toBe("late");
    const secret = statSync(join(rootfs, "etc/secret"));
    expect([secret.mode & 0o7777, secret.uid, secret.gid]).toEqual([0o640, 1234, 5678]);
    expect(statSync(join(rootfs, "bin/tool")).mode & 0o7777).toBe(0o4755);
    expect(lstatSync(join(rootfs, "lib")).isSymbolicLink()).toBe(true);
    expect(readdirSync(rootfs).some((n) => n.startsWith(".wh."))).toBe(false);
    expect(statSync(rootfs).mode & 0o777).toBe(0o755);
  });

  it("refuses members with .. and keeps absolute names inside the rootfs", async () => {
    const { rootfs, outside, work } = await fresh("dotdot");
    const evil = await craftTar(join(work, "evil.tar"), [{ name: "../outside/escaped", content: "x" }]);
    await expect(applyLayer(evil, rootfs, { workDir: work })).rejects.toMatchObject({ code: "IMAGE_INVALID" });
    expect(readdirSync(outside)).toEqual([]);
    const abs = await craftTar(join(work, "abs.tar"), [{ name: "/etc/abs", content: "inside" }]);
    await applyLayer(abs, rootfs, { workDir: work });
    expect(readFileSync(join(rootfs, "etc/abs"), "utf8")).toBe("inside");
  });

  it("never writes through a lower layer's symlink: the upper directory replaces it", async () => {
    const { rootfs, outside, work } = await fresh("lowerlink");
    await symlink(outside, join(rootfs, "evil"));
    const upper = await craftTar(join(work, "upper.tar"), [{ name: "evil/pwned", content: "x" }]);
    await applyLayer(upper, rootfs, { workDir: work });
    expect(readdirSync(outside)).toEqual([]);
    expect(lstatSync(join(rootfs, "evil")).isDirectory()).toBe(true);
    expect(readFileSync(join(rootfs, "evil/pwned"), "utf8")).toBe("x");
  });

  it("refuses a layer that writes beneath its own symlink", async () => {
    const { rootfs, outside, work } = await fresh("samelayer");
    await symlink(outside, join(rootfs, "b"));
    const t = await craftTar(join(work, "t.tar"), [
      { name: "a", type: "symlink", linkname: "b" },
      { name: "a/pwned", content: "x" },
    ]);
    await expect(applyLayer(t, rootfs, { workDir: work })).rejects.toMatchObject({ code: "IMAGE_INVALID" });
    expect(readdirSync(outside)).toEqual([]);
  });

  it("refuses hard links through a symlink and ignores whiteouts behind one", async () => {
    const { rootfs, outside, work } = await fresh("hardlink");
    await writeFile(join(outside, "secret"), "host");
    await symlink(outside, join(rootfs, "evil"));
    const link = await craftTar(join(work, "l.tar"), [{ name: "h", type: "hardlink", linkname: "evil/secret" }]);
    await expect(applyLayer(link, rootfs, { workDir: work })).rejects.toMatchObject({ code: "IMAGE_INVALID" });
    const wh = await craftTar(join(work, "w.tar"), [{ name: "evil/.wh.secret", content: "" }]);
    await applyLayer(wh, rootfs, { workDir: work });
    expect(readFileSync(join(outside, "secret"), "utf8")).toBe("host");
  });

  it("replaces a lower directory with an upper file and a lower file with an upper directory", async () => {
    const { rootfs, work } = await fresh("kinds");
    await makeTree(rootfs, { "d/x": "1", f: "file" });
    const t = await craftTar(join(work, "t.tar"), [
      { name: "d", content: "now a file" },
      { name: "f", type: "dir" },
      { name: "f/inner", content: "i" },
    ]);
    await applyLayer(t, rootfs, { workDir: work });
    expect(readFileSync(join(rootfs, "d"), "utf8")).toBe("now a file");
    expect(readFileSync(join(rootfs, "f/inner"), "utf8")).toBe("i");
  });
});

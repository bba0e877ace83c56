// The conformance suite's cases on what lies in a host's layers directory, by name (HostDisks:
// hasLayer, removeLayer, listLayers; HostLayers: replace, storeAs): the control plane never reads
// that directory itself. Run inside machineHostConformance, on its subject.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import type { ResolvedImage } from "../../src/index.js";
import type { HostUnderTest } from "./machine-host-conformance.js";

const sha = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");
const DISK = 1024 ** 3;

export function layerFilesConformance(
  subject: () => { t: HostUnderTest; image: ResolvedImage; base: string },
  timeoutMs: number,
): void {
  it("says which disks and layers lie in its layers directory, lists them by prefix, and removes one once or twice", {
    timeout: timeoutMs,
  }, async () => {
    const { t, base } = subject();
    await t.host.createDisk(base, "conf-files-1.qcow2", DISK);
    await t.host.createDisk(base, "conf-files-2.qcow2", DISK);
    expect(await t.host.listLayers("conf-files-")).toEqual(["conf-files-1.qcow2", "conf-files-2.qcow2"]);
    expect(await t.host.listLayers("")).toEqual(expect.arrayContaining([base, "conf-files-1.qcow2"]));
    expect(await t.host.hasLayer("conf-files-1.qcow2")).toBe(true);
    expect(await t.host.hasLayer(base)).toBe(true);
    await t.host.removeLayer("conf-files-1.qcow2");
    await t.host.removeLayer("conf-files-1.qcow2");
    await t.host.removeLayer("conf-never-made.qcow2");
    expect(await t.host.hasLayer("conf-files-1.qcow2")).toBe(false);
    expect(await t.host.listLayers("conf-files-")).toEqual(["conf-files-2.qcow2"]);
    expect(await t.host.listLayers("conf-no-such-prefix")).toEqual([]);
    // A base's link whose base is gone (its image removed) is not there.
    const goneDir = path.join(t.dir, "..", `conf-gone-${path.basename(t.dir)}`);
    mkdirSync(goneDir, { recursive: true });
    writeFileSync(path.join(goneDir, "base.qcow2"), "a base");
    symlinkSync(path.join(goneDir, "base.qcow2"), path.join(t.dir, "base-conf-gone"));
    expect(await t.host.hasLayer("base-conf-gone")).toBe(true);
    rmSync(goneDir, { recursive: true });
    expect(await t.host.hasLayer("base-conf-gone")).toBe(false);
    await t.host.removeLayer("base-conf-gone");
    // A flattening's temporary layer written hidden (before names were checked) is listed under its name.
    writeFileSync(path.join(t.dir, ".tmp-flat-conf"), "flat");
    expect(await t.host.listLayers("tmp-flat-")).toEqual(["tmp-flat-conf"]);
    expect(readFileSync(path.join(t.dir, "tmp-flat-conf"), "utf8")).toBe("flat");
    await t.host.removeLayer("tmp-flat-conf");
  });

  it("links an image's base by its name only: IMAGE_NOT_FOUND for one it does not hold, VALIDATION_FAILED for a path", {
    timeout: timeoutMs,
  }, async () => {
    const { t, image, base } = subject();
    expect(image.base).not.toMatch(/[/\\]/);
    expect(await t.host.linkBase(image.base)).toBe(base);
    const before = await t.host.listLayers("");
    const notHeld = `sha256:${"0".repeat(64)}`;
    await expect(t.host.linkBase(notHeld)).rejects.toMatchObject({ code: "IMAGE_NOT_FOUND" });
    // A file that is a base, given by its path (as checkpoints once recorded one): refused, not linked.
    const outside = path.join(t.dir, "..", `conf-base-path-${path.basename(t.dir)}`, "base.qcow2");
    mkdirSync(path.dirname(outside), { recursive: true });
    writeFileSync(outside, "a base");
    const hex = "a".repeat(64);
    for (const name of ["", "..", outside, `/blobs/sha256/${hex}/base.qcow2`, `sha256/${hex}`, `../sha256:${hex}`, base]) {
      await expect(t.host.linkBase(name), name).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
    }
    expect(await t.host.listLayers("")).toEqual(before);
    expect(readFileSync(outside, "utf8")).toBe("a base");
    rmSync(path.dirname(outside), { recursive: true });
  });

  it("refuses a name or prefix that is a path with VALIDATION_FAILED, before any file is touched", {
    timeout: timeoutMs,
  }, async () => {
    const { t } = subject();
    const outsideName = `conf-outside-${path.basename(t.dir)}`;
    const outside = path.join(t.dir, "..", outsideName);
    writeFileSync(outside, "not the host's");
    const layers = t.host.layers(t.blobs);
    const refused = { code: "VALIDATION_FAILED" };
    for (const name of ["", "..", `../${outsideName}`, outside, "sub/x.qcow2", ".tmp-flat-x"]) {
      await expect(t.host.hasLayer(name), name).rejects.toMatchObject(refused);
      await expect(t.host.removeLayer(name), name).rejects.toMatchObject(refused);
      await expect(layers.storeAs(name, name, sha("x")), name).rejects.toMatchObject(refused);
      await expect(
        layers.replace(name, "conf-x", { sha256: sha("x"), size: 1 }, () => true),
        name,
      ).rejects.toMatchObject(refused);
      await expect(
        layers.replace("conf-x", name, { sha256: sha("x"), size: 1 }, () => true),
        name,
      ).rejects.toMatchObject(refused);
      if (name !== "") await expect(t.host.listLayers(name), name).rejects.toMatchObject(refused);
    }
    expect(readFileSync(outside, "utf8")).toBe("not the host's");
  });

  it("swaps a flattened layer in once its commit is recorded (stored first); a refused commit keeps the layer", {
    timeout: timeoutMs,
  }, async () => {
    const { t } = subject();
    const layers = t.host.layers(t.blobs);
    writeFileSync(path.join(t.dir, "conf-swap"), "deep layer");
    await layers.store("conf-swap");
    const flat = Buffer.from("the flattened layer");
    const digest = { sha256: sha(flat), size: flat.length };
    writeFileSync(path.join(t.dir, "conf-swap-flat"), flat);
    expect(await layers.replace("conf-swap", "conf-swap-flat", digest, () => false)).toBe(false);
    expect(readFileSync(path.join(t.dir, "conf-swap"), "utf8")).toBe("deep layer");
    expect(await t.host.hasLayer("conf-swap-flat")).toBe(false);

    writeFileSync(path.join(t.dir, "conf-swap-flat"), flat);
    let storedAtCommit: unknown = null;
    const committed = await layers.replace("conf-swap", "conf-swap-flat", digest, async () => {
      storedAtCommit = await t.blobs.stat("conf-swap");
      return true;
    });
    expect(committed).toBe(true);
    expect(storedAtCommit).toEqual({ size: flat.length });
    expect(readFileSync(path.join(t.dir, "conf-swap")).equals(flat)).toBe(true);
    expect(await t.host.hasLayer("conf-swap-flat")).toBe(false);
    await layers.fetch("conf-swap", digest.sha256);
  });

  it("stores a file as a key only when it holds the recorded hash", { timeout: timeoutMs }, async () => {
    const { t } = subject();
    const layers = t.host.layers(t.blobs);
    const bytes = Buffer.from("bytes recorded");
    writeFileSync(path.join(t.dir, "conf-as-tmp"), bytes);
    expect(await layers.storeAs("conf-as", "conf-as-tmp", sha("other bytes"))).toBe(false);
    expect(existsSync(path.join(t.dir, "conf-as-tmp"))).toBe(true);
    expect(await t.host.hasLayer("conf-as")).toBe(false);
    expect(await layers.storeAs("conf-as", "conf-as-tmp", sha(bytes))).toBe(true);
    expect(readFileSync(path.join(t.dir, "conf-as")).equals(bytes)).toBe(true);
    expect(await t.host.hasLayer("conf-as-tmp")).toBe(false);
    expect(await t.blobs.stat("conf-as")).toEqual({ size: bytes.length });
    // Stored again where it lies; a file that is not there is not stored.
    expect(await layers.storeAs("conf-as", "conf-as", sha(bytes))).toBe(true);
    expect(await layers.storeAs("conf-as", "conf-as-missing", sha(bytes))).toBe(false);
  });
}

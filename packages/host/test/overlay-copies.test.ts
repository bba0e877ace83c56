// A sandbox's disk written from memory after the first qemu-img create of its (backing, size):
// the same bytes as qemu-img writes, a disk qemu-img accepts, and a backing that is gone still an error.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createOverlay } from "../src/disks/overlay.js";
import { createOverlayCopy } from "../src/disks/overlay-copies.js";

const dir = mkdtempSync(path.join(tmpdir(), "overlay-copies-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const at = (name: string) => path.join(dir, name);

describe("overlay copies", () => {
  it("writes what qemu-img writes, and qemu-img reads it with its backing", async () => {
    execFileSync("qemu-img", ["create", "-q", "-f", "qcow2", at("base.qcow2"), "64M"]);
    await createOverlayCopy("base.qcow2", at("a.qcow2"), 128 * 1024 ** 2);
    await createOverlayCopy("base.qcow2", at("b.qcow2"), 128 * 1024 ** 2);
    await createOverlay("base.qcow2", at("ref.qcow2"), 128 * 1024 ** 2);
    expect(readFileSync(at("b.qcow2")).equals(readFileSync(at("ref.qcow2")))).toBe(true);
    const info = JSON.parse(execFileSync("qemu-img", ["info", "--output=json", at("b.qcow2")], { encoding: "utf8" }));
    expect(info["virtual-size"]).toBe(128 * 1024 ** 2);
    expect(info["backing-filename"]).toBe("base.qcow2");
    execFileSync("qemu-img", ["check", "-q", at("b.qcow2")]);
    // Another size is its own qemu-img create.
    await createOverlayCopy("base.qcow2", at("c.qcow2"), 256 * 1024 ** 2);
    expect(
      JSON.parse(execFileSync("qemu-img", ["info", "--output=json", at("c.qcow2")], { encoding: "utf8" }))["virtual-size"],
    ).toBe(256 * 1024 ** 2);
  });

  it("leaves a backing that is gone to qemu-img, which refuses it", async () => {
    rmSync(at("base.qcow2"));
    await expect(createOverlayCopy("base.qcow2", at("d.qcow2"), 128 * 1024 ** 2)).rejects.toThrow();
  });
});

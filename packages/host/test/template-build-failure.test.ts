// A template build that fails is tried once more, each failure is reported with its reason, and
// nothing half-built stays: a directory under templates/ is a template built or building (a
// caller that waits for the builds to settle must not wait on a dead one), and an image
// template's disk goes too. Real QEMU, given a kernel it cannot load: it exits at once, no guest runs.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { type TemplateInputs, TemplateStore, templateKey } from "../src/qemu.js";

const dir = mkdtempSync(path.join(tmpdir(), "sandtree-tmpl-fail-"));
const layers = path.join(dir, "layers");
const root = path.join(dir, "templates");
const kernel = path.join(dir, "vmlinuz");
const initramfs = path.join(dir, "initramfs");
mkdirSync(layers);
writeFileSync(kernel, "not a kernel");
writeFileSync(initramfs, "not an initramfs");
const base = path.join(layers, "base-img.qcow2");
execFileSync("qemu-img", ["create", "-q", "-f", "qcow2", base, "16M"]);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a failed template build", () => {
  it("is tried twice, says why each time, and leaves neither its directory nor its disk", async () => {
    const failures: Array<{ message: string; attempt: number; of: number }> = [];
    const store = new TemplateStore(layers, root, path.join(dir, "run"), null, undefined, (err, _inputs, a) =>
      failures.push({ message: err.message, ...a }),
    );
    const inputs: TemplateInputs = {
      kernel,
      initramfs,
      accel: "tcg",
      cpuCores: 1,
      memoryMb: 128,
      nic: false,
      image: { digest: "sha256:0", backing: base, diskBytes: 16 * 1024 * 1024 },
    };
    const key = templateKey(inputs);
    // Concurrent callers share the one build (and its retry).
    const [a, b] = await Promise.all([store.ensure(inputs), store.ensure(inputs)]);
    expect([a, b]).toEqual([null, null]);
    expect(failures.map((f) => [f.attempt, f.of])).toEqual([
      [1, 2],
      [2, 2],
    ]);
    expect(failures[0]?.message).toMatch(/did not start|QEMU/i);
    expect(existsSync(path.join(root, key))).toBe(false);
    expect(readdirSync(layers)).toEqual(["base-img.qcow2"]);
    await store.close();
  });

  it("is not reported once the store is closed (a shutdown is no failure)", async () => {
    const failures: string[] = [];
    const store = new TemplateStore(layers, root, path.join(dir, "run"), null, undefined, (err) => failures.push(err.message));
    await store.close();
    const got = await store.ensure({ kernel, initramfs, accel: "tcg", cpuCores: 2, memoryMb: 128, nic: false });
    expect(got).toBeNull();
    expect(failures).toEqual([]);
    expect(existsSync(root) ? readdirSync(root) : []).toEqual([]);
  });
});

import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { type TemplateInputs, TemplateStore, templateKey } from "../src/qemu.js";
import { templateScratch } from "./helpers/template-scratch.js";

const { dir, layers, root, kernel, initramfs, base } = templateScratch("sandtree-tmpl-fail-", "not a kernel", "not an initramfs");

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

// The scratch directory of the TemplateStore tests, removed after the file's tests.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll } from "vitest";

/**
 * A new directory holding layers/ with a 16 MiB `base-img.qcow2` (`base`), the templates/ path
 * (`root`, not made), and a kernel and an initramfs file of the given contents.
 */
export function templateScratch(prefix: string, kernelText: string, initramfsText: string) {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  const layers = path.join(dir, "layers");
  const root = path.join(dir, "templates");
  const kernel = path.join(dir, "vmlinuz");
  const initramfs = path.join(dir, "initramfs");
  mkdirSync(layers);
  writeFileSync(kernel, kernelText);
  writeFileSync(initramfs, initramfsText);
  const base = path.join(layers, "base-img.qcow2");
  execFileSync("qemu-img", ["create", "-q", "-f", "qcow2", base, "16M"]);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return { dir, layers, root, kernel, initramfs, base };
}

// Warm template pruning: templates no create can match any more (another kernel, agent or
// device model, a vanished image base, a build cut short) are removed; a template disk stays as
// long as any layer (a live sandbox's overlay, a checkpoint layer) names it as its backing.
// Real qcow2 files (qemu-img), no VM.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createOverlay, qcow2BackingName, type TemplateInputs, TemplateStore, templateKey } from "../src/index.js";

const dir = mkdtempSync(path.join(tmpdir(), "sandtree-tmpl-prune-"));
const layers = path.join(dir, "layers");
const root = path.join(dir, "templates");
const kernel = path.join(dir, "vmlinuz");
const initramfs = path.join(dir, "initramfs");
mkdirSync(layers);
writeFileSync(kernel, "kernel v1");
writeFileSync(initramfs, "agent v1");
execFileSync("qemu-img", ["create", "-q", "-f", "qcow2", path.join(layers, "base-img.qcow2"), "16M"]);
execFileSync("qemu-img", ["create", "-q", "-f", "qcow2", path.join(layers, "base-old.qcow2"), "16M"]);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const inputs = (over: Partial<TemplateInputs> = {}): TemplateInputs => ({
  imageDigest: "sha256:aa",
  backing: "base-img.qcow2",
  kernel,
  initramfs,
  accel: "tcg",
  cpuCores: 1,
  memoryMb: 256,
  diskBytes: 16 << 20,
  nic: false,
  ...over,
});

/** What TemplateStore.build leaves behind, without booting a VM. */
async function fakeTemplate(i: TemplateInputs): Promise<string> {
  const key = templateKey(i);
  const d = path.join(root, key);
  mkdirSync(d, { recursive: true });
  const diskName = `tmpl-${key}.qcow2`;
  await createOverlay(i.backing, path.join(layers, diskName), i.diskBytes);
  writeFileSync(path.join(d, "ram"), Buffer.alloc(1 << 20, 1));
  writeFileSync(path.join(d, "state"), "state");
  writeFileSync(
    path.join(d, "template.json"),
    JSON.stringify({ key, diskName, ramFile: path.join(d, "ram"), stateFile: path.join(d, "state"), inputs: i }),
  );
  return key;
}

const disk = (key: string) => path.join(layers, `tmpl-${key}.qcow2`);

describe("qcow2BackingName", () => {
  it("reads the backing name from the header, and null for anything else", async () => {
    await createOverlay("base-img.qcow2", path.join(layers, "probe.qcow2"), 16 << 20);
    expect(qcow2BackingName(path.join(layers, "probe.qcow2"))).toBe("base-img.qcow2");
    expect(qcow2BackingName(path.join(layers, "base-img.qcow2"))).toBeNull();
    writeFileSync(path.join(dir, "raw"), Buffer.alloc(4096));
    expect(qcow2BackingName(path.join(dir, "raw"))).toBeNull();
    writeFileSync(path.join(dir, "short"), "QFI");
    expect(qcow2BackingName(path.join(dir, "short"))).toBeNull();
    expect(qcow2BackingName(path.join(dir, "missing"))).toBeNull();
    rmSync(path.join(layers, "probe.qcow2"));
  });
});

describe("TemplateStore.prune", () => {
  const store = new TemplateStore(layers, root, path.join(dir, "run"));

  it("removes stale templates, keeps disks layers still sit on until they are free", async () => {
    const a = await fakeTemplate(inputs());
    const b = await fakeTemplate(inputs({ memoryMb: 512 }));
    const gone = await fakeTemplate(inputs({ imageDigest: "sha256:bb", backing: "base-old.qcow2" }));
    rmSync(path.join(layers, "base-old.qcow2")); // the image base was removed
    // A build a crash cut short: a directory without template.json and its disk.
    const half = "0123456789abcdef01234567";
    mkdirSync(path.join(root, half));
    await createOverlay("base-img.qcow2", disk(half), 16 << 20);
    // A sandbox cloned from b, and a checkpoint layer of an unrelated sandbox.
    await createOverlay(`tmpl-${b}.qcow2`, path.join(layers, "live-sb1-0.qcow2"), 16 << 20);
    await createOverlay("base-img.qcow2", path.join(layers, "ck-1.qcow2"), 16 << 20);

    // Nothing changed for a and b: only the broken ones go.
    let r = store.prune();
    expect(r.removed.sort()).toEqual([gone, half].sort());
    expect(r.keptDisks).toEqual([]);
    expect(r.freedBytes).toBeGreaterThanOrEqual(1 << 20);
    expect(existsSync(disk(gone)) || existsSync(disk(half)) || existsSync(path.join(root, half))).toBe(false);
    expect(store.get(inputs())?.key).toBe(a);
    expect(store.get(inputs({ memoryMb: 512 }))?.key).toBe(b);

    // A new guest agent: every template is stale; b's disk stays while the sandbox sits on it.
    writeFileSync(initramfs, "agent v2, longer");
    expect(store.get(inputs())).toBeNull();
    r = store.prune();
    expect(r.removed.sort()).toEqual([a, b].sort());
    expect(r.keptDisks).toEqual([`tmpl-${b}.qcow2`]);
    expect(existsSync(path.join(root, a)) || existsSync(path.join(root, b)) || existsSync(disk(a))).toBe(false);
    expect(existsSync(disk(b))).toBe(true);
    // The clone's chain still opens end to end.
    execFileSync("qemu-img", ["info", "--backing-chain", "-U", path.join(layers, "live-sb1-0.qcow2")]);

    // Once the sandbox is gone, so is the disk; bases and other layers are never touched.
    rmSync(path.join(layers, "live-sb1-0.qcow2"));
    r = store.prune();
    expect(r.removed).toEqual([b]);
    expect(existsSync(disk(b))).toBe(false);
    expect(existsSync(path.join(layers, "base-img.qcow2")) && existsSync(path.join(layers, "ck-1.qcow2"))).toBe(true);
    expect(store.prune()).toEqual({ removed: [], keptDisks: [], freedBytes: 0 });
  });

  it("keeps a current template and its disk", async () => {
    const c = await fakeTemplate(inputs({ cpuCores: 2 }));
    expect(store.prune().removed).toEqual([]);
    expect(store.get(inputs({ cpuCores: 2 }))?.key).toBe(c);
    expect(existsSync(disk(c))).toBe(true);
  });
});

// Warm template pruning: templates no start can match any more (another kernel, agent, device
// model or template format, an image base gone, a build cut short) or unused for too long are
// removed, and the stale shape templates are offered for a rebuild with today's inputs. An image
// template's disk (`tmpl-<key>.qcow2` in the layers directory) stays as long as any layer (a live
// sandbox's overlay, a checkpoint layer) names it as its backing. Real qcow2 files, no VM.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  createOverlay,
  qcow2BackingName,
  qcow2VirtualSize,
  type TemplateInputs,
  TemplateStore,
  templateKey,
} from "../src/qemu.js";
import { templateScratch } from "./helpers/template-scratch.js";

const { dir, layers, root, kernel, initramfs } = templateScratch("sandtree-tmpl-prune-", "kernel v1", "agent v1");

const inputs = (over: Partial<TemplateInputs> = {}): TemplateInputs => ({
  kernel,
  initramfs,
  accel: "tcg",
  cpuCores: 1,
  memoryMb: 256,
  nic: false,
  ...over,
});

/** What TemplateStore.build leaves behind, without booting a VM. */
async function fakeTemplate(i: TemplateInputs): Promise<string> {
  const key = templateKey(i);
  const d = path.join(root, key);
  mkdirSync(d, { recursive: true });
  writeFileSync(path.join(d, "ram"), Buffer.alloc(1 << 20, 1));
  writeFileSync(path.join(d, "state"), "state");
  const diskName = i.image ? `tmpl-${key}.qcow2` : undefined;
  if (i.image) await createOverlay(i.image.backing, path.join(layers, `tmpl-${key}.qcow2`), i.image.diskBytes);
  writeFileSync(
    path.join(d, "template.json"),
    JSON.stringify({
      key,
      ...(diskName ? { diskName } : {}),
      rootWait: !i.image,
      ramFile: path.join(d, "ram"),
      stateFile: path.join(d, "state"),
      inputs: i,
    }),
  );
  return key;
}

const imageOf = { image: { digest: "sha256:aa", backing: "base-img.qcow2", diskBytes: 16 << 20 } };

describe("qcow2 headers", () => {
  it("reads the backing name and the virtual size, and null for anything else", async () => {
    await createOverlay("base-img.qcow2", path.join(layers, "probe.qcow2"), 48 << 20);
    expect(qcow2BackingName(path.join(layers, "probe.qcow2"))).toBe("base-img.qcow2");
    expect(qcow2VirtualSize(path.join(layers, "probe.qcow2"))).toBe(48 << 20);
    expect(qcow2BackingName(path.join(layers, "base-img.qcow2"))).toBeNull();
    writeFileSync(path.join(dir, "raw"), Buffer.alloc(4096));
    expect(qcow2BackingName(path.join(dir, "raw"))).toBeNull();
    expect(qcow2VirtualSize(path.join(dir, "raw"))).toBeNull();
    writeFileSync(path.join(dir, "short"), "QFI");
    expect(qcow2BackingName(path.join(dir, "short"))).toBeNull();
    expect(qcow2BackingName(path.join(dir, "missing"))).toBeNull();
    rmSync(path.join(layers, "probe.qcow2"));
  });
});

describe("TemplateStore.prune", () => {
  const store = new TemplateStore(layers, root, path.join(dir, "run"));
  const current = () => ({ kernel, initramfs });

  it("removes stale, broken and idle templates and offers the stale shapes for a rebuild", async () => {
    const a = await fakeTemplate(inputs());
    const b = await fakeTemplate(inputs({ memoryMb: 512 }));
    const img = await fakeTemplate(inputs(imageOf));
    expect(img).not.toBe(a);
    // A build a crash cut short: a directory without template.json.
    const half = "0123456789abcdef01234567";
    mkdirSync(path.join(root, half));
    // Disks of image templates that are gone: one a sandbox still sits on, one unused.
    const legacyUsed = "tmpl-aaaaaaaaaaaaaaaaaaaaaaaa.qcow2";
    const legacyFree = "tmpl-bbbbbbbbbbbbbbbbbbbbbbbb.qcow2";
    await createOverlay("base-img.qcow2", path.join(layers, legacyUsed), 16 << 20);
    await createOverlay("base-img.qcow2", path.join(layers, legacyFree), 16 << 20);
    await createOverlay(legacyUsed, path.join(layers, "live-sb1-0.qcow2"), 16 << 20);

    let r = store.prune(current());
    expect(r.removed).toEqual([half]);
    expect(r.rebuild).toEqual([]);
    expect(r.keptDisks).toEqual([legacyUsed]);
    expect(existsSync(path.join(layers, legacyFree))).toBe(false);
    expect(store.get(inputs())?.key).toBe(a);
    expect(store.get(inputs({ memoryMb: 512 }))?.key).toBe(b);
    expect(store.get(inputs())?.rootWait).toBe(true);
    const imgT = store.get(inputs(imageOf));
    expect(imgT?.rootWait).toBe(false);
    expect(imgT?.diskName).toBe(`tmpl-${img}.qcow2`);

    // A new guest agent: every template is stale, and both shapes (not the image) come back for a rebuild.
    writeFileSync(initramfs, "agent v2, longer");
    expect(store.get(inputs())).toBeNull();
    r = store.prune(current());
    expect(r.removed.sort()).toEqual([a, b, img].sort());
    expect(existsSync(path.join(layers, `tmpl-${img}.qcow2`))).toBe(false);
    expect(r.freedBytes).toBeGreaterThanOrEqual(2 << 20);
    expect(r.rebuild.map((i) => i.memoryMb).sort()).toEqual([256, 512]);
    expect(r.rebuild.every((i) => i.initramfs === initramfs && templateKey(i) !== a && templateKey(i) !== b)).toBe(true);
    expect(existsSync(path.join(root, a)) || existsSync(path.join(root, b))).toBe(false);

    // Once the sandbox is gone, so is the legacy disk; bases are never touched.
    rmSync(path.join(layers, "live-sb1-0.qcow2"));
    r = store.prune(current());
    expect(r.keptDisks).toEqual([]);
    expect(existsSync(path.join(layers, legacyUsed))).toBe(false);
    expect(existsSync(path.join(layers, "base-img.qcow2"))).toBe(true);
    expect(store.prune(current())).toEqual({ removed: [], keptDisks: [], freedBytes: 0, rebuild: [] });
  });

  it("keeps a current template while it is used, removes it once idle too long", async () => {
    const c = await fakeTemplate(inputs({ cpuCores: 2 }));
    expect(store.prune(current(), { maxIdleMs: 3600_000 }).removed).toEqual([]);
    expect(store.get(inputs({ cpuCores: 2 }))?.key).toBe(c);
    const old = new Date(Date.now() - 7200_000);
    utimesSync(path.join(root, c, "template.json"), old, old);
    const r = store.prune(current(), { maxIdleMs: 3600_000 });
    expect(r.removed).toEqual([c]);
    expect(r.rebuild).toEqual([]);
    expect(store.get(inputs({ cpuCores: 2 }))).toBeNull();
  });
});

describe("image templates", () => {
  const store = new TemplateStore(layers, path.join(dir, "templates-img"), path.join(dir, "run"));
  it("are keyed apart from the shape template and go stale with their image base", async () => {
    const own = path.join(dir, "templates-img");
    const i = inputs({ image: { digest: "sha256:bb", backing: "base-2.qcow2", diskBytes: 16 << 20 } });
    execFileSync("qemu-img", ["create", "-q", "-f", "qcow2", path.join(layers, "base-2.qcow2"), "16M"]);
    const key = templateKey(i);
    mkdirSync(path.join(own, key), { recursive: true });
    for (const f of ["ram", "state"]) writeFileSync(path.join(own, key, f), f);
    await createOverlay("base-2.qcow2", path.join(layers, `tmpl-${key}.qcow2`), 16 << 20);
    writeFileSync(
      path.join(own, key, "template.json"),
      JSON.stringify({
        key,
        diskName: `tmpl-${key}.qcow2`,
        ramFile: path.join(own, key, "ram"),
        stateFile: path.join(own, key, "state"),
        inputs: i,
      }),
    );
    expect(templateKey(inputs())).not.toBe(key);
    expect(store.prune({ kernel, initramfs }).removed).toEqual([]);
    expect(store.get(i)?.key).toBe(key);
    rmSync(path.join(layers, "base-2.qcow2"));
    const r = store.prune({ kernel, initramfs });
    expect(r.removed).toEqual([key]);
    expect(r.rebuild).toEqual([]);
    expect(existsSync(path.join(layers, `tmpl-${key}.qcow2`))).toBe(false);
  });
});

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { createOverlay, qcow2BackingName } from "../disks/overlay.js";
import { modulesDiskFor } from "../paths.js";
import { type Accel, DEVICE_MODEL } from "../vmm/qemu-args.js";
import { QemuVm } from "../vmm/qemu-vm.js";
import { saveVmState } from "./migration.js";

/** Everything a warm template depends on: change any of it and the template is rebuilt. */
export interface TemplateInputs {
  imageDigest: string;
  /** Name of the image base (or layer) in `layersDir` the template's disk sits on. */
  backing: string;
  kernel: string;
  initramfs: string;
  accel: Accel;
  cpuCores: number;
  memoryMb: number;
  diskBytes: number;
  /** Whether the VM has a NIC (clones must have the template's devices). */
  nic?: boolean;
}

/** Lends a template VM a tap device for its NIC (a tap without rules: all its traffic dropped). */
export interface TemplateTaps {
  acquire(): Promise<string>;
  release(tap: string): Promise<void>;
}

export interface Template {
  key: string;
  /** Its disk, in `layersDir`: clones put their overlay on it. */
  diskName: string;
  ramFile: string;
  stateFile: string;
  inputs: TemplateInputs;
}

/** A file's identity for cache keys: size and mtime (the kernel and initramfs are rebuilt, not edited). */
function fileStamp(file: string): string {
  const st = statSync(file);
  return `${st.size}:${st.mtimeMs}`;
}

export function templateKey(i: TemplateInputs): string {
  const stamp = JSON.stringify({
    ...i,
    kernel: fileStamp(i.kernel),
    initramfs: fileStamp(i.initramfs),
    // The modules disk is part of the device model and of the guest's view of its kernel.
    modules: ((m) => (m ? fileStamp(m) : null))(modulesDiskFor(i.initramfs)),
    devices: DEVICE_MODEL,
  });
  return createHash("sha256").update(stamp).digest("hex").slice(0, 24);
}

/**
 * Warm templates: per image, kernel, agent, CPU, memory and disk size, boot once, wait for the
 * agent, save the VM with its RAM in a file; every later create is a copy-on-write clone that
 * resumes in a fraction of a second (FACTS.md: 0.05 s raw). The RAM file lives with the template
 * (clones map it privately, so its pages are shared through the page cache until written).
 */
export class TemplateStore {
  private readonly building = new Map<string, Promise<Template | null>>();
  private readonly abort = new AbortController();

  constructor(
    readonly layersDir: string,
    readonly root: string,
    readonly runRoot: string,
    private readonly taps: TemplateTaps | null = null,
  ) {
    mkdirSync(root, { recursive: true });
  }

  private dir(key: string): string {
    return path.join(this.root, key);
  }

  /** Stops template builds in flight (their VMs are stopped, nothing half-built is used). */
  async close(): Promise<void> {
    this.abort.abort(new Error("shutting down"));
    await Promise.allSettled([...this.building.values()]);
  }

  /** The ready template for these inputs, or null. */
  get(inputs: TemplateInputs): Template | null {
    const key = templateKey(inputs);
    const meta = path.join(this.dir(key), "template.json");
    if (!existsSync(meta)) return null;
    const t = JSON.parse(readFileSync(meta, "utf8")) as Template;
    if (!existsSync(t.ramFile) || !existsSync(t.stateFile) || !existsSync(path.join(this.layersDir, t.diskName))) return null;
    return t;
  }

  /** Builds the template once (concurrent callers share the build); null when the build failed. */
  ensure(inputs: TemplateInputs): Promise<Template | null> {
    if (this.abort.signal.aborted) return Promise.resolve(null);
    const ready = this.get(inputs);
    if (ready) return Promise.resolve(ready);
    const key = templateKey(inputs);
    let p = this.building.get(key);
    if (!p) {
      p = this.build(key, inputs)
        .catch(() => null)
        .finally(() => this.building.delete(key));
      this.building.set(key, p);
    }
    return p;
  }

  /**
   * Removes templates no create can use any more: built for another kernel, initramfs (guest
   * agent) or device model than the ones there now, on an image base that is gone, or cut short
   * by a crash mid-build. Their RAM and state files go at once (a running clone maps its RAM file
   * privately, and the kernel keeps an unlinked file's pages for it). Their disk goes only when no
   * file in `layersDir` names it as its backing: live sandboxes' overlays and checkpoint layers
   * taken from a warm clone sit on it; such a disk stays until a later prune finds it unused.
   * Call it when no template build or create is in flight (the server does, at start).
   */
  prune(): { removed: string[]; keptDisks: string[]; freedBytes: number } {
    const removed: string[] = [];
    const keptDisks: string[] = [];
    let freedBytes = 0;
    // Bytes on disk (RAM files are sparse).
    const size = (f: string) => {
      try {
        return statSync(f).blocks * 512;
      } catch {
        return 0;
      }
    };
    if (this.building.size > 0) return { removed, keptDisks, freedBytes };
    const current = new Set<string>();
    for (const key of readdirSync(this.root)) {
      let live = false;
      try {
        const t = JSON.parse(readFileSync(path.join(this.dir(key), "template.json"), "utf8")) as Template;
        // templateKey throws when the template's kernel or initramfs is gone: no create can match it.
        live = templateKey(t.inputs) === key && existsSync(path.join(this.layersDir, t.inputs.backing));
      } catch {}
      if (live) {
        current.add(key);
        continue;
      }
      for (const f of ["ram", "state"]) freedBytes += size(path.join(this.dir(key), f));
      rmSync(this.dir(key), { recursive: true, force: true });
      removed.push(key);
    }
    const layers = existsSync(this.layersDir) ? readdirSync(this.layersDir) : [];
    const backed = new Set<string>();
    for (const f of layers) {
      const b = qcow2BackingName(path.join(this.layersDir, f));
      if (b) backed.add(path.basename(b));
    }
    for (const f of layers) {
      const m = /^tmpl-([0-9a-f]+)\.qcow2$/.exec(f);
      if (!m?.[1] || current.has(m[1])) continue;
      if (backed.has(f)) {
        keptDisks.push(f);
        continue;
      }
      freedBytes += size(path.join(this.layersDir, f));
      rmSync(path.join(this.layersDir, f), { force: true });
      if (!removed.includes(m[1])) removed.push(m[1]);
    }
    return { removed, keptDisks, freedBytes };
  }

  private async build(key: string, inputs: TemplateInputs): Promise<Template> {
    const dir = this.dir(key);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const diskName = `tmpl-${key}.qcow2`;
    const disk = path.join(this.layersDir, diskName);
    const ramFile = path.join(dir, "ram");
    const stateFile = path.join(dir, "state");
    rmSync(disk, { force: true });
    rmSync(ramFile, { force: true });
    await createOverlay(inputs.backing, disk, inputs.diskBytes);
    if (inputs.nic && !this.taps) throw new Error("a template with a NIC needs taps");
    const tap = inputs.nic && this.taps ? await this.taps.acquire() : null;
    const vm = await QemuVm.start({
      ...(tap ? { tap } : {}),
      name: `sandtree-tmpl-${key}`,
      accel: inputs.accel,
      cpuCores: inputs.cpuCores,
      memoryMb: inputs.memoryMb,
      kernel: inputs.kernel,
      initramfs: inputs.initramfs,
      rootDisk: disk,
      runDir: path.join(this.runRoot, `tmpl-${key.slice(0, 12)}`),
      logDir: path.join(dir, "logs"),
      memoryFile: { path: ramFile, share: true },
      signal: this.abort.signal,
    }).catch(async (err) => {
      if (tap) await this.taps?.release(tap);
      throw err;
    });
    try {
      // Let the guest finish booting work (module probes, resize) so clones start idle.
      await vm.agent.exec({ argv: ["/bin/sh", "-c", "sync"] }).exited.catch(() => {});
      if (!vm.qmp) throw new Error("template VM has no QMP connection");
      await saveVmState(vm.qmp, stateFile, { ignoreShared: true, signal: this.abort.signal });
    } finally {
      // The saved RAM file and disk must never change again: no guest runs on them any more.
      await vm.stop({ graceMs: 0 });
      if (tap) await this.taps?.release(tap);
    }
    const t: Template = { key, diskName, ramFile, stateFile, inputs };
    writeFileSync(path.join(dir, "template.json.tmp"), JSON.stringify(t));
    renameSync(path.join(dir, "template.json.tmp"), path.join(dir, "template.json"));
    return t;
  }
}

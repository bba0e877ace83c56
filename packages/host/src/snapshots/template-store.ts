import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { createBlankDisk, createOverlay, qcow2BackingName } from "../disks/overlay.js";
import { modulesDiskFor } from "../paths.js";
import { freePageReporting } from "../vmm/free-page-reporting.js";
import { defaultJailConfig, type JailConfig } from "../vmm/jail.js";
import { type Accel, cpuKey, DEVICE_MODEL, IDLE_KERNEL_ARGS } from "../vmm/qemu-args.js";
import { QemuVm } from "../vmm/qemu-vm.js";
import { saveVmState } from "./migration.js";

/**
 * Everything a warm template depends on: change any of it and the template is rebuilt. Without
 * `image` it is a shape template: it stops before it reads a root disk, and each clone mounts its
 * own (any image, fork or restore, any disk size). With `image` it is that image's template,
 * saved with its root mounted: the fastest repeat create of that image, disk size and shape.
 */
export interface TemplateInputs {
  kernel: string;
  initramfs: string;
  accel: Accel;
  cpuCores: number;
  memoryMb: number;
  /** Whether the VM has a NIC (clones must have the template's devices). */
  nic?: boolean;
  /** Whether its CPU offers hardware virtualization (clones must have the template's CPU). */
  nested?: boolean;
  /** An image template: the image's digest, its base in `layersDir` and the disk size. */
  image?: { digest: string; backing: string; diskBytes: number };
}

/** How templates are made; bumped when that changes (older templates are then pruned, never used). */
const TEMPLATE_FORMAT = { shape: "root-wait-2", image: "image-3" };

/** The placeholder root disk a template boots with (empty; the guest never mounts it). */
const PLACEHOLDER_BYTES = 64 * 1024 * 1024;

/** Lends a template VM a tap device for its NIC (a tap without rules: all its traffic dropped). */
export interface TemplateTaps {
  acquire(): Promise<string>;
  release(tap: string): Promise<void>;
}

export interface Template {
  key: string;
  /** An image template's disk, in `layersDir`: its clones put their overlay on it. */
  diskName?: string;
  /** The guest waits for its root disk (a shape template): a clone gets its own. */
  rootWait: boolean;
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
    // virtio-balloon is in the saved state only where this host runs it.
    freePageReporting: freePageReporting(),
    idleArgs: IDLE_KERNEL_ARGS,
    cpu: cpuKey(i.accel, i.nested === true),
    format: i.image ? TEMPLATE_FORMAT.image : TEMPLATE_FORMAT.shape,
  });
  return createHash("sha256").update(stamp).digest("hex").slice(0, 24);
}

/** How often a failing template build is tried before starts of its shape stay cold. */
const BUILD_ATTEMPTS = 2;

/** Told of each failed template build: why, for which inputs, and the attempt (`of` in all). */
export type TemplateBuildErrorHandler = (err: Error, inputs: TemplateInputs, attempt: { attempt: number; of: number }) => void;

/**
 * Warm templates. A shape template: one per kernel, agent, accelerator, CPU count and memory size
 * (not per image: the guest is saved before it reads any root disk). A template VM boots with
 * `sandtree.root=wait` on an empty placeholder disk; once its agent answers (root "waiting") it is
 * saved with its RAM in a file. Every later start (any image, a restore, a fork) is a
 * copy-on-write clone given its own disk, which the agent mounts at the clone's handshake
 * (FACTS.md: a raw clone answers in 0.05 s). The RAM file lives with the template (clones map
 * it privately, so its pages are shared through the page cache until written).
 * An image template (inputs.image) is booted on an overlay of that image and saved with its root
 * mounted: its clones skip the mount and start with the image's pages cached, so repeat creates
 * of an image are faster still; its page cache holds only the image base and what its own boot
 * wrote, never another sandbox's data.
 */
export class TemplateStore {
  private readonly building = new Map<string, Promise<Template | null>>();
  private readonly abort = new AbortController();
  /** Keys whose `template.json` mtime (last use, for pruning) was set in this process. */
  private readonly touched = new Set<string>();

  constructor(
    readonly layersDir: string,
    readonly root: string,
    readonly runRoot: string,
    private readonly taps: TemplateTaps | null = null,
    /** The jail template VMs run in (their host's). */
    private readonly jail: JailConfig = defaultJailConfig(),
    /** Told why a build failed, and which attempt it was (not for builds stopped by close()). */
    private readonly onBuildError: TemplateBuildErrorHandler = () => {},
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

  /** The ready template for these inputs, or null. Marks it used (prune keeps used templates). */
  get(inputs: TemplateInputs): Template | null {
    const key = templateKey(inputs);
    const meta = path.join(this.dir(key), "template.json");
    if (!existsSync(meta)) return null;
    const t = JSON.parse(readFileSync(meta, "utf8")) as Template;
    if (!existsSync(t.ramFile) || !existsSync(t.stateFile)) return null;
    if (t.diskName && !existsSync(path.join(this.layersDir, t.diskName))) return null;
    t.rootWait = !t.inputs.image;
    if (!this.touched.has(key)) {
      this.touched.add(key);
      const now = new Date();
      utimesSync(meta, now, now);
    }
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
      p = this.buildWithRetry(key, inputs).finally(() => this.building.delete(key));
      this.building.set(key, p);
    }
    return p;
  }

  /**
   * Removes templates no create can use any more: built for another kernel, initramfs (guest
   * agent), device model or template format than the ones there now, cut short by a crash
   * mid-build, or unused for `maxIdleMs`. Their files go at once (a running clone maps its RAM
   * file privately, and the kernel keeps an unlinked file's pages for it). Returns, in
   * `rebuild`, the inputs (with today's kernel and initramfs) of stale templates whose shape
   * (accelerator, CPUs, memory, NIC) was in use, so the caller can build them again (image
   * templates are rebuilt at their image's next create). An image template is stale too once its
   * image base is gone. Its disk (`tmpl-<key>.qcow2` in `layersDir`) goes only when no file in
   * `layersDir` names it as its backing (overlays and checkpoint layers of its clones sit on it),
   * else at a later prune.
   * Call it when no template build or create is in flight (the server does, at start).
   */
  prune(
    current: Pick<TemplateInputs, "kernel" | "initramfs">,
    opts: { maxIdleMs?: number; now?: number } = {},
  ): { removed: string[]; keptDisks: string[]; freedBytes: number; rebuild: TemplateInputs[] } {
    const removed: string[] = [];
    const keptDisks: string[] = [];
    const rebuild: TemplateInputs[] = [];
    let freedBytes = 0;
    // Bytes on disk (RAM files are sparse).
    const size = (f: string) => {
      try {
        return statSync(f).blocks * 512;
      } catch {
        return 0;
      }
    };
    if (this.building.size > 0) return { removed, keptDisks, freedBytes, rebuild };
    const now = opts.now ?? Date.now();
    const kept = new Set<string>();
    for (const key of readdirSync(this.root)) {
      let live = false;
      let t: Template | null = null;
      try {
        t = JSON.parse(readFileSync(path.join(this.dir(key), "template.json"), "utf8")) as Template;
        // templateKey throws when the template's kernel or initramfs is gone: no create can match it.
        live =
          templateKey(t.inputs) === key && (!t.inputs.image || existsSync(path.join(this.layersDir, t.inputs.image.backing)));
      } catch {}
      const idle =
        t && opts.maxIdleMs !== undefined && now - statSync(path.join(this.dir(key), "template.json")).mtimeMs > opts.maxIdleMs;
      if (live && !idle) {
        kept.add(key);
        continue;
      }
      if (
        !live &&
        t?.inputs &&
        !t.inputs.image &&
        typeof t.inputs.cpuCores === "number" &&
        typeof t.inputs.memoryMb === "number"
      ) {
        const again: TemplateInputs = {
          ...current,
          accel: t.inputs.accel,
          cpuCores: t.inputs.cpuCores,
          memoryMb: t.inputs.memoryMb,
        };
        if (t.inputs.nic) again.nic = true;
        if (t.inputs.nested) again.nested = true;
        try {
          if (!rebuild.some((r) => templateKey(r) === templateKey(again))) rebuild.push(again);
        } catch {}
      }
      for (const f of readdirSync(this.dir(key))) freedBytes += size(path.join(this.dir(key), f));
      rmSync(this.dir(key), { recursive: true, force: true });
      removed.push(key);
    }
    const layers = existsSync(this.layersDir) ? readdirSync(this.layersDir) : [];
    const legacy = layers.filter((f) => {
      const m = /^tmpl-([0-9a-f]+)\.qcow2$/.exec(f);
      return m?.[1] !== undefined && !kept.has(m[1]);
    });
    if (legacy.length > 0) {
      const backed = new Set<string>();
      for (const f of layers) {
        const b = qcow2BackingName(path.join(this.layersDir, f));
        if (b) backed.add(path.basename(b));
      }
      for (const f of legacy) {
        if (backed.has(f)) {
          keptDisks.push(f);
          continue;
        }
        freedBytes += size(path.join(this.layersDir, f));
        rmSync(path.join(this.layersDir, f), { force: true });
      }
    }
    return { removed, keptDisks, freedBytes, rebuild };
  }

  /**
   * A build, tried again once when it fails: a template boot is background work no user waits
   * for, and a guest may reset while it boots (seen under nested KVM on an emulated CPU). Each
   * failure is reported; nothing half-built stays (a directory under templates/ is a template
   * built or building).
   */
  private async buildWithRetry(key: string, inputs: TemplateInputs): Promise<Template | null> {
    for (let attempt = 1; attempt <= BUILD_ATTEMPTS; attempt++) {
      try {
        return await this.build(key, inputs);
      } catch (err) {
        this.discard(key, inputs);
        if (this.abort.signal.aborted) return null;
        this.onBuildError(err as Error, inputs, { attempt, of: BUILD_ATTEMPTS });
      }
    }
    return null;
  }

  /** Removes a failed build's files (its directory and an image template's disk); never throws. */
  private discard(key: string, inputs: TemplateInputs): void {
    try {
      rmSync(this.dir(key), { recursive: true, force: true });
      if (inputs.image) rmSync(path.join(this.layersDir, `tmpl-${key}.qcow2`), { force: true });
    } catch {}
  }

  private async build(key: string, inputs: TemplateInputs): Promise<Template> {
    const dir = this.dir(key);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const image = inputs.image;
    const diskName = image ? `tmpl-${key}.qcow2` : undefined;
    const disk = diskName ? path.join(this.layersDir, diskName) : path.join(dir, "placeholder.qcow2");
    const ramFile = path.join(dir, "ram");
    const stateFile = path.join(dir, "state");
    rmSync(disk, { force: true });
    // A shape template's disk is empty: the kernel probes it (partition scan) and caches what it
    // read, but nothing of any sandbox's disk can be in the saved RAM (clones flush that cache
    // before they mount theirs). An image template's is an overlay of the image alone.
    if (image) await createOverlay(image.backing, disk, image.diskBytes);
    else await createBlankDisk(disk, PLACEHOLDER_BYTES);
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
      ...(image ? {} : { rootWait: true }),
      runDir: path.join(this.runRoot, `tmpl-${key.slice(0, 12)}`),
      logDir: path.join(dir, "logs"),
      memoryFile: { path: ramFile, share: true },
      ...(inputs.nested ? { nested: true } : {}),
      signal: this.abort.signal,
      jail: this.jail,
    }).catch(async (err) => {
      if (tap) await this.taps?.release(tap);
      throw err;
    });
    try {
      const want = image ? "mounted" : "waiting";
      if ((vm.agent.info?.root ?? "mounted") !== want)
        throw new Error(`template guest reports its root as ${vm.agent.info?.root ?? "unknown"}`);
      // Let an image template's guest finish its boot work (resize, module probes) so clones start idle.
      if (image) await vm.agent.exec({ argv: ["/bin/sh", "-c", "sync"] }).exited.catch(() => {});
      if (!vm.qmp) throw new Error("template VM has no QMP connection");
      await saveVmState(vm.qmp, stateFile, { ignoreShared: true, socketDir: vm.opts.runDir, signal: this.abort.signal });
    } finally {
      // The saved RAM file must never change again: no guest runs on it any more.
      await vm.stop({ graceMs: 0 });
      if (tap) await this.taps?.release(tap);
    }
    const t: Template = { key, ...(diskName ? { diskName } : {}), rootWait: !image, ramFile, stateFile, inputs };
    writeFileSync(path.join(dir, "template.json.tmp"), JSON.stringify(t));
    renameSync(path.join(dir, "template.json.tmp"), path.join(dir, "template.json"));
    return t;
  }
}

import { execFile } from "node:child_process";
import { access, mkdir, readdir, readFile, rm, rmdir, stat } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { SandtreeError } from "@sandtree/protocol";

const execFileP = promisify(execFile);
const MiB = 1024 ** 2;

/** How a volume's size is held: its own preallocated ext4 image ("image"), or nothing ("none"). */
export type VolumeBound = "image" | "none";

/** The server's settings it reads (config.ts: SANDTREE_VOLUME_BOUND, SANDTREE_VOLUME_IMAGE_MIB). */
export interface VolumeImagesOptions {
  /** The volumes directory: each volume's directory is `<volumesDir>/<name>/data`, its image beside it. */
  volumesDir: string;
  volumeBound: VolumeBound;
  /** Test-only: every image this many MiB whatever the volume's size_gb. */
  volumeImageMiB?: number | undefined;
}

async function run(cmd: string, args: string[], what: string): Promise<void> {
  try {
    await execFileP(cmd, args, { maxBuffer: 1 << 20 });
  } catch (err) {
    const text = `${(err as { stderr?: string }).stderr ?? ""} ${(err as Error).message}`.trim().split("\n")[0] ?? "";
    const full = /No space left|Disk quota exceeded/.test(text);
    throw new SandtreeError(full ? "HOST_DISK_FULL" : "INTERNAL", `could not ${what}: ${cmd} ${args.join(" ")}: ${text}`);
  }
}

/** Whether `dir` is a mount point (its device differs from its parent's). */
export async function isMounted(dir: string): Promise<boolean> {
  try {
    const [a, b] = await Promise.all([stat(dir), stat(path.dirname(dir))]);
    return a.dev !== b.dev;
  } catch {
    return false;
  }
}

/**
 * Each volume's size bound: its `data` directory is the mount point of its own ext4 image
 * (`image`, the file beside it), preallocated (a sparse image on a host that fills loses data
 * silently) and loop-mounted `nodev,nosuid`, so a guest writing past size_gb gets ENOSPC and
 * nothing else is touched (docs/architecture.md, "Size bound"). Every step is idempotent.
 */
export class VolumeImages {
  constructor(private readonly o: VolumeImagesOptions) {}

  get bounded(): boolean {
    return this.o.volumeBound === "image";
  }

  static imageOf(dir: string): string {
    return path.join(path.dirname(dir), "image");
  }

  /** A new volume's directory: its image made (size_gb reserved on the host's disk) and mounted. */
  async create(dir: string, sizeGb: number): Promise<void> {
    if (!this.bounded) {
      await mkdir(dir, { recursive: true, mode: 0o755 });
      return;
    }
    await this.check();
    const img = VolumeImages.imageOf(dir);
    await this.unmount(dir);
    await mkdir(dir, { recursive: true, mode: 0o755 });
    const bytes = this.o.volumeImageMiB !== undefined ? this.o.volumeImageMiB * MiB : sizeGb * 1024 * MiB;
    await rm(img, { force: true });
    await run("fallocate", ["--length", String(bytes), img], "reserve the volume's disk");
    // No reserved blocks (the volume is all the user's), its UUID changeable cheaply (snapshots).
    await run(
      "mkfs.ext4",
      ["-q", "-F", "-T", "default", "-m", "0", "-O", "metadata_csum_seed", "-E", "nodiscard", img],
      "format the volume",
    );
    await this.mount(dir);
    // mkfs's lost+found would show in every listing: e2fsck makes it again when it needs one.
    await rmdir(path.join(dir, "lost+found")).catch(() => {});
  }

  /** The volume's image mounted when it has one, else made (bounded) or its directory made (unbounded). */
  async ensure(dir: string, sizeGb: number): Promise<void> {
    if (await exists(VolumeImages.imageOf(dir))) await this.mount(dir);
    else await this.create(dir, sizeGb);
  }

  /** Whether the volume has an image (volumes made before the bound, or with it off, have none). */
  async hasImage(dir: string): Promise<boolean> {
    return exists(VolumeImages.imageOf(dir));
  }

  /** Mounts the volume's image on its directory; already mounted, or a volume without one (made unbounded), is left as is. */
  async mount(dir: string): Promise<void> {
    const img = VolumeImages.imageOf(dir);
    if (!(await exists(img)) || (await isMounted(dir))) return;
    await this.sharedRoot();
    await mkdir(dir, { recursive: true, mode: 0o755 });
    await run("mount", ["-t", "ext4", "-o", "loop,nodev,nosuid", img, dir], "mount the volume");
  }

  /** Unmounts the volume's directory (not mounted: nothing to do). The loop device goes with it (autoclear). */
  async unmount(dir: string): Promise<void> {
    if (!(await isMounted(dir))) return;
    await run("umount", [dir], "unmount the volume");
  }

  /** At shutdown: unmounts every volume it can (a busy one is left, and found mounted at the next start), then the root. */
  async unmountAll(): Promise<void> {
    const root = this.o.volumesDir;
    const ids = await readdir(root).catch(() => [] as string[]);
    for (const id of ids) await this.unmount(path.join(root, id, "data")).catch(() => {});
    this.sharing = null;
    for (let i = 0; i < 4 && (await mountedAt(root)); i++)
      await run("umount", [root], "unmount the volumes' root").catch(() => {});
  }

  /**
   * The volumes' root made a shared mount (a bind onto itself) before the first image is mounted
   * under it: NFS-Ganesha runs in a mount namespace of its own, a slave of this one, and sees
   * mounts made after it started only through a shared mount (docs/architecture.md, "Size bound").
   */
  private sharing: Promise<void> | null = null;
  private sharedRoot(): Promise<void> {
    // Once per process (concurrent mounts would stack binds), again after a failure or a shutdown.
    this.sharing ??= (async () => {
      const root = this.o.volumesDir;
      if (!(await mountedAt(root))) await run("mount", ["--rbind", root, root], "bind the volumes' root");
      await run("mount", ["--make-shared", root], "share the volumes' root");
    })().catch((err) => {
      this.sharing = null;
      throw err;
    });
    return this.sharing;
  }

  /**
   * `dst`'s image as a copy of `src`'s taken while `src` is frozen (consistent; cheap where the
   * host's file system clones blocks, a full copy elsewhere), with a UUID of its own, mounted.
   */
  async snapshot(src: string, dst: string): Promise<void> {
    const from = VolumeImages.imageOf(src);
    const to = VolumeImages.imageOf(dst);
    await mkdir(dst, { recursive: true, mode: 0o755 });
    await run("fsfreeze", ["--freeze", src], "freeze the volume");
    try {
      await run("cp", ["--reflink=auto", "--sparse=never", "--", from, to], "copy the volume's image");
    } finally {
      await run("fsfreeze", ["--unfreeze", src], "thaw the volume");
    }
    // Two mounted file systems with one UUID would share an fsid, which NFS file handles carry.
    await run("tune2fs", ["-U", "random", to], "give the snapshot its own UUID");
    await this.mount(dst);
  }

  /** Whether this host can loop-mount (checked once): else a bounded create is refused, never silently unbounded. */
  private checked: Promise<void> | null = null;
  private check(): Promise<void> {
    this.checked ??= (async () => {
      const root = process.getuid?.() === 0;
      const loop = await exists("/dev/loop-control");
      if (!root || !loop) {
        this.checked = null;
        throw new SandtreeError(
          "VOLUME_BOUND_UNAVAILABLE",
          `this host cannot bound volumes (${!root ? "not root" : "no /dev/loop-control"}): run the server as root with loop devices, or with SANDTREE_VOLUME_BOUND=none for volumes bounded by the host's disk only`,
        );
      }
    })();
    return this.checked;
  }
}

/** Whether `p` is a mount point (a bind of the same file system included), by the mount table. */
async function mountedAt(p: string): Promise<boolean> {
  const table = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  const want = path.resolve(p).replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`);
  return table.split("\n").some((line) => line.split(" ")[4] === want);
}

async function exists(p: string): Promise<boolean> {
  return access(p).then(
    () => true,
    () => false,
  );
}

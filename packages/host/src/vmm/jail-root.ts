import { existsSync, lstatSync, statSync } from "node:fs";
import path from "node:path";

/**
 * What a jailed process's own root holds besides the system's programs (/usr, read-only) and a
 * few device nodes: each path bind-mounted at the same path, so the names QEMU is given resolve.
 */
export interface JailRoot {
  /** Read-write mounts (permissions still decide): run directory, console log, disk directory, RAM file. */
  rw: string[];
  /** Read-only mounts: backing layers outside those, the real files behind links (image cache). */
  ro: string[];
  /** Host device nodes bound in (/dev/kvm under KVM). */
  devices?: string[];
}

const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** The top-level links of a merged-/usr system (/bin -> usr/bin) copied as links; real directories bound read-only. */
const SYSTEM_TOP = ["/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"];
const DEVICES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/** What a jail's root is made of, worked out on the host (paths that do not exist left out). */
export interface JailRootPlan {
  /** Directories made in the root (parents included). */
  dirs: string[];
  /** The host's symbolic links copied (merged-/usr tops). */
  links: string[];
  /** The host's device nodes copied. */
  devices: string[];
  binds: Array<{ src: string; ro: boolean; file: boolean }>;
  /** The root's own /dev/net/tun. */
  tun: boolean;
}

export function jailRootPlan(root: JailRoot, opts: { tun?: boolean } = {}): JailRootPlan {
  const links: string[] = [];
  const binds: JailRootPlan["binds"] = [];
  for (const top of SYSTEM_TOP) {
    const st = lstatSync(top, { throwIfNoEntry: false });
    if (st?.isSymbolicLink()) links.push(top);
    else if (st?.isDirectory()) binds.push({ src: top, ro: true, file: false });
  }
  binds.push({ src: "/usr", ro: true, file: false });
  if (existsSync("/etc/ld.so.cache")) binds.push({ src: "/etc/ld.so.cache", ro: true, file: true });
  const seen = new Set<string>();
  const add = (p: string, ro: boolean) => {
    const abs = path.resolve(p);
    const st = statSync(abs, { throwIfNoEntry: false });
    // Inside a directory already bound: visible through it.
    if (!st || seen.has(abs) || [...seen].some((s) => abs.startsWith(`${s}/`))) return;
    seen.add(abs);
    binds.push({ src: abs, ro, file: !st.isDirectory() });
  };
  // Directories first, so files inside them are not bound twice.
  const byDepth = (xs: string[]) => [...xs].sort((a, b) => a.length - b.length);
  for (const p of byDepth(root.rw)) add(p, false);
  for (const p of byDepth(root.ro)) add(p, true);
  for (const d of root.devices ?? []) if (existsSync(d)) binds.push({ src: d, ro: false, file: true });
  const dirs = new Set(["/dev/net", "/proc", "/.old"]);
  for (const b of binds) dirs.add(b.file ? path.dirname(b.src) : b.src);
  return { dirs: [...dirs], links, devices: DEVICES.filter((d) => existsSync(d)), binds, tun: opts.tun === true };
}

/**
 * The plan as the steps of sandtree-jail's argv (packages/host/jail/sandtree-jail.c), in the
 * order the shell steps below run: directories, links, devices, binds, /dev/net/tun.
 */
export function jailRootArgs(plan: JailRootPlan): string[] {
  const args: string[] = [];
  for (const d of plan.dirs) args.push("--mkdir", d);
  for (const l of plan.links) args.push("--link", l);
  for (const d of plan.devices) args.push("--dev", d);
  for (const b of plan.binds) args.push(`--bind${b.file ? "-file" : ""}${b.ro ? "-ro" : ""}`, b.src);
  if (plan.tun) args.push("--tun");
  return args;
}

/**
 * Shell steps (the launcher when sandtree-jail is not built), run as root in the jail's fresh
 * mount namespace, that build `root` on a tmpfs at `mountpoint` and pivot into it (the host's
 * tree unmounted): afterwards the process sees its own files, /usr, /dev's basic nodes and its
 * own /proc (its uid's processes alone), nothing else. `tun`: the root's own /dev/net/tun.
 */
export function jailRootSteps(mountpoint: string, plan: JailRootPlan): string[] {
  const R = (p: string) => q(path.join(mountpoint, p));
  const { links, binds } = plan;
  const steps = [`mount -t tmpfs -o mode=0755,size=1m,nosuid tmpfs ${q(mountpoint)}`, `mkdir -p ${plan.dirs.map(R).join(" ")}`];
  if (links.length) steps.push(`cp -a ${links.map(q).join(" ")} ${R("/")}`);
  if (plan.devices.length) steps.push(`cp -a ${plan.devices.map(q).join(" ")} ${R("/dev")}`);
  for (const b of binds) {
    if (b.file) steps.push(`: > ${R(b.src)}`);
    steps.push(`mount ${b.ro ? "-o bind,ro" : "--bind"} ${q(b.src)} ${R(b.src)}`);
  }
  // A VM on a tap opens /dev/net/tun, which hosts may keep 0600: the jail has its own node,
  // usable for the taps its uid owns alone (attaching to any other needs CAP_NET_ADMIN).
  if (plan.tun) steps.push(`mknod -m 0666 ${R("/dev/net/tun")} c 10 200`);
  steps.push(
    `mount -t proc -o hidepid=invisible,subset=pid proc ${R("/proc")}`,
    `cd ${q(mountpoint)}`,
    "pivot_root . .old",
    "umount -l /.old",
    "cd /",
  );
  return steps;
}

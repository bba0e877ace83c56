import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

/**
 * Where this host's cgroup controllers live. v2: one unified tree with every controller. v1
 * (or hybrid, where cgroup2 is mounted with no controllers): one directory per controller.
 */
export type CgroupLayout =
  | { version: 2; root: string }
  | { version: 1; cpu: string; memory: string; pids: string; blkio: string };

const V2_NEEDED = ["cpu", "memory", "pids", "io"] as const;
// A v1 controller's root: its mount (named for the controller) holds cgroup.procs; the root
// cgroup lacks most limit files (no pids.max there), so those are no probe.
const V1_NEEDED = { cpu: "cgroup.procs", memory: "cgroup.procs", pids: "cgroup.procs", blkio: "cgroup.procs" } as const;

/**
 * Finds the controllers under `root` (default /sys/fs/cgroup; tests pass a fake directory).
 * v2 wins when its root offers every controller; else v1 when each controller has its own
 * mount (the hybrid layout's `unified` subtree, without controllers, is ignored); else null.
 */
export function detectCgroups(root = "/sys/fs/cgroup"): CgroupLayout | null {
  const controllers = path.join(root, "cgroup.controllers");
  if (existsSync(controllers)) {
    const have = new Set(readFileSync(controllers, "utf8").trim().split(/\s+/));
    if (V2_NEEDED.every((c) => have.has(c))) return { version: 2, root };
  }
  const found: Partial<Record<keyof typeof V1_NEEDED, string>> = {};
  for (const [ctrl, probe] of Object.entries(V1_NEEDED) as Array<[keyof typeof V1_NEEDED, string]>) {
    const dir = path.join(root, ctrl);
    if (!existsSync(path.join(dir, probe))) return null;
    found[ctrl] = dir;
  }
  return { version: 1, cpu: found.cpu!, memory: found.memory!, pids: found.pids!, blkio: found.blkio! };
}

/** The controller roots of a layout (one for v2, four for v1), for walking every tree. */
export function controllerRoots(layout: CgroupLayout): string[] {
  return layout.version === 2 ? [layout.root] : [layout.cpu, layout.memory, layout.pids, layout.blkio];
}

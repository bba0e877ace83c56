import { realpathSync } from "node:fs";
import path from "node:path";
import { controllerRoots, detectCgroups } from "@sandtree/host";

/**
 * `ip netns exec` mounts a fresh /sys for the namespace, without the host's cgroup mounts, and a
 * server there could not give its VMs their cgroups (it refuses to start without them, as it
 * should). This wraps a command so that it first mounts the host's hierarchies again in that
 * private mount namespace (the same hierarchies: a v1 mount with the same controllers attaches
 * to the existing one), as an operator running sandtree in a namespace of its own would.
 */
export function withHostCgroups(cmd: string, args: string[]): [string, string[]] {
  const layout = detectCgroups();
  if (!layout) return [cmd, args];
  const lines = ["set -e"];
  if (layout.version === 2) lines.push("mount -t cgroup2 cgroup2 /sys/fs/cgroup");
  else {
    lines.push("mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup");
    for (const root of controllerRoots(layout)) {
      const name = path.basename(root);
      // A co-mounted hierarchy (cpu,cpuacct) is mounted with all its controllers.
      const options = path.basename(realpathSync(root));
      lines.push(`mkdir -p /sys/fs/cgroup/${options}`, `mount -t cgroup -o ${options} cgroup /sys/fs/cgroup/${options}`);
      if (name !== options) lines.push(`ln -sfn ${options} /sys/fs/cgroup/${name}`);
    }
  }
  lines.push('exec "$0" "$@"');
  return ["sh", ["-c", lines.join("\n"), cmd, ...args]];
}

// The host's cgroup hierarchies for a process run in a network namespace of its own: for tests
// (packages/server/test: network, shutdown, fleet workers) and benches (bench/network.mjs) that
// run a sandtree server there. Types and what it does: host-cgroups.d.mts.
import { realpathSync } from "node:fs";
import path from "node:path";
import { controllerRoots, detectCgroups } from "@sandtree/host";

export function withHostCgroups(cmd, args) {
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

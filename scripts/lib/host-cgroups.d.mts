// Types of host-cgroups.mjs (the host's cgroup hierarchies for a process in a network namespace).

/**
 * `ip netns exec` mounts a fresh /sys for the namespace, without the host's cgroup mounts, and a
 * server there could not give its VMs their cgroups (it refuses to start without them, as it
 * should). This wraps a command so that it first mounts the host's hierarchies again in that
 * private mount namespace (the same hierarchies: a v1 mount with the same controllers attaches
 * to the existing one), as an operator running sandtree in a namespace of its own would.
 * Answers the wrapped command and its argv (the command itself where this host has no cgroups).
 */
export function withHostCgroups(cmd: string, args: string[]): [string, string[]];

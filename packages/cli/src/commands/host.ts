import type { Host, HostStateChange } from "@sandtree/protocol";
import type { Command } from "commander";
import type { CliContext } from "../context.js";
import { formatAge, renderTable } from "../output.js";
import { addListCommand, addOneCommand } from "./shared.js";

const gib = (mib: number) => `${(mib / 1024).toFixed(mib % 1024 === 0 ? 0 : 1)}`;

/** One row per host: state, its usage over its capacity, what it holds, its last heartbeat. */
export function hostTable(hosts: readonly Host[], now = Date.now()): string {
  return renderTable(
    ["NAME", "STATE", "VCPUS", "MEMORY GiB", "DISK GiB", "SANDBOXES", "ACCEL", "IMAGES", "HEARTBEAT"],
    hosts.map((h) => [
      h.name,
      h.state,
      `${h.usage.vcpus}/${h.capacity.vcpus}`,
      `${gib(h.usage.memory_mib)}/${gib(h.capacity.memory_mib)}`,
      `${h.usage.disk_gib}/${h.capacity.disk_gib}`,
      String(h.usage.placements),
      h.capacity.accel,
      String(h.locality.images),
      `${formatAge(h.last_heartbeat_at, now)} ago`,
    ]),
  );
}

/** `sandtree host ...`: the fleet's hosts (admin key). */
export function registerHostCommands(program: Command, ctx: CliContext): void {
  const host = program.command("host").description("fleet hosts: list, cordon, drain, uncordon (admin key)");

  addListCommand(host, ctx, {
    description: "list hosts with their state, usage over capacity and last heartbeat",
    key: "hosts",
    fetch: (client) => client.hosts.list(),
    table: (hosts) => hostTable(hosts),
  });

  const change = (verb: "cordon" | "drain" | "uncordon", description: string, done: (r: HostStateChange) => string) =>
    addOneCommand(host, ctx, {
      name: verb,
      description,
      argument: ["<name>", "host name, e.g. worker-1 (see `sandtree host list`)"],
      call: (client, name) => client.hosts[verb](name),
      text: (r) => `${done(r)}\n`,
    });

  change("cordon", "take no new work on the host; its sandboxes stay", (r) => `${r.host.name} ${r.host.state}`);
  change(
    "drain",
    "cordon the host; its running sandboxes stay until they end (none is moved)",
    (r) => `${r.host.name} ${r.host.state}: ${r.remaining_sandboxes} sandboxes still there, staying until they end`,
  );
  change("uncordon", "let the host take work again", (r) => `${r.host.name} ${r.host.state}`);
}

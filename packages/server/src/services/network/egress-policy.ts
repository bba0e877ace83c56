import { type NetworkMode, SandtreeError } from "@sandtree/protocol";

/** The egress lists a create or an update may give (at most one of them). */
export interface EgressLists {
  network_allowlist?: string[] | undefined;
  network_denylist?: string[] | undefined;
}

export interface EgressPolicy {
  mode: NetworkMode;
  allow: string[];
  deny: string[];
}

/** The policy a create or update asks for; without a list, the server's default. */
export function egressPolicy(defaultPolicy: "allow" | "deny", body: EgressLists): EgressPolicy {
  if (body.network_allowlist && body.network_denylist) {
    throw new SandtreeError("VALIDATION_FAILED", "network_allowlist and network_denylist are mutually exclusive", {
      field: "network_denylist",
    });
  }
  if (body.network_allowlist) return { mode: "allowlist", allow: [...new Set(body.network_allowlist)], deny: [] };
  if (body.network_denylist) return { mode: "denylist", allow: [], deny: [...new Set(body.network_denylist)] };
  return { mode: defaultPolicy === "deny" ? "deny_all" : "allow_all", allow: [], deny: [] };
}

/** Asked-for network fields on a server that gives sandboxes no network (`why`: its reason). */
export function networkUnavailable(why: string | null, fields: string[]): SandtreeError {
  return new SandtreeError(
    "NETWORK_UNAVAILABLE",
    `this server gives sandboxes no network (${why ?? "not started"}), so ${fields.join(" and ")} cannot be honoured`,
    { field: fields[0], reason: why },
  );
}

import { create } from "@bufbuild/protobuf";
import { NetworkMode } from "@sandtree/protocol";
import {
  type EgressPolicy as EgressPolicyMsg,
  type NetworkAttachment as NetworkAttachmentMsg,
  NetworkAttachmentSchema,
  type OpenedNetworks as OpenedNetworksMsg,
  OpenedNetworksSchema,
  type SandboxNetwork,
} from "../gen/sandtree/host/v1/host_resources_pb.js";
import { MachineRefusedError } from "../machine/machine.js";
import type { NetworkAttachment, OpenedNetworks, SandboxNetworkSpec } from "../network/host-networks.js";
import type { EgressPolicy } from "../network/network-manager.js";

// The networks port's plain data and its messages, both ways: the caller's (RemoteNetworks)
// and the worker's (networkCalls) in one place.

// The messages back into the port's plain data: protobuf checked the types, these the values
// protobuf cannot (a policy's mode, `enabled`), before the host sees them.

export function policyOf(p: EgressPolicyMsg | undefined): EgressPolicy {
  const mode = NetworkMode.safeParse(p?.mode);
  if (!mode.success) throw new MachineRefusedError(`no egress mode named ${JSON.stringify(String(p?.mode).slice(0, 40))}`);
  return { mode: mode.data, allow: [...(p?.allow ?? [])], deny: [...(p?.deny ?? [])] };
}

export function specOf(n: SandboxNetwork): SandboxNetworkSpec {
  return {
    sandboxId: n.sandboxId,
    slot: n.slot,
    enabled: n.enabled,
    policy: policyOf(n.policy),
    tunnels: { ...n.tunnels },
    generation: n.generation,
  };
}

export function enabledOf(s: string): "auto" | "on" {
  if (s === "auto" || s === "on") return s;
  throw new MachineRefusedError(`networks are opened "auto" or "on", not ${JSON.stringify(s.slice(0, 40))}`);
}

export const attachmentMsg = (a: NetworkAttachment): NetworkAttachmentMsg => create(NetworkAttachmentSchema, a);

export function openedMsg(o: OpenedNetworks): OpenedNetworksMsg {
  return create(OpenedNetworksSchema, {
    result:
      o.subnet === null
        ? { case: "unavailable", value: o.unavailable }
        : { case: "open", value: { subnet: o.subnet, skipped: o.skipped, attached: o.attached.map(attachmentMsg) } },
  });
}

// What the caller sends, and the worker's answers back into plain data.

export const policyMsg = (p: EgressPolicy) => ({ mode: p.mode, allow: p.allow, deny: p.deny });

export function specMsg(n: SandboxNetworkSpec) {
  return {
    sandboxId: n.sandboxId,
    slot: n.slot,
    enabled: n.enabled,
    policy: policyMsg(n.policy),
    tunnels: n.tunnels,
    generation: n.generation,
  };
}

export function attachmentOf(a: NetworkAttachmentMsg): NetworkAttachment {
  return { sandboxId: a.sandboxId, tap: a.tap, guestNet: a.guestNet, address: a.address, gateway: a.gateway };
}

export function openedOf(o: OpenedNetworksMsg): OpenedNetworks {
  switch (o.result.case) {
    case "open": {
      const { subnet, skipped, attached } = o.result.value;
      return { subnet, unavailable: null, skipped: [...skipped], attached: attached.map(attachmentOf) };
    }
    case "unavailable":
      return { subnet: null, unavailable: o.result.value };
    default:
      throw new Error("the worker answered opening its networks with neither a pool nor why there is none");
  }
}

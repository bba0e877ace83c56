import { mkdir } from "node:fs/promises";
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { NetworkMode } from "@sandtree/protocol";
import {
  type EgressPolicy as EgressPolicyMsg,
  type MachineHostService,
  type NetworkAttachment as NetworkAttachmentMsg,
  NetworkAttachmentSchema,
  type OpenedNetworks as OpenedNetworksMsg,
  OpenedNetworksSchema,
  type SandboxNetwork,
} from "../gen/sandtree/host/v1/host_pb.js";
import { MachineRefusedError } from "../machine/machine.js";
import type {
  HostNetworks,
  NetworkAttachment,
  OpenedNetworks,
  OpenNetworksRequest,
  SandboxNetworkSpec,
} from "../network/host-networks.js";
import type { EgressPolicy } from "../network/network-manager.js";
import { answer, answerEmpty } from "./remote-errors.js";

type NetworkCalls = Pick<
  ServiceImpl<typeof MachineHostService>,
  | "openNetworks"
  | "attachNetwork"
  | "updateNetwork"
  | "detachNetwork"
  | "acquireTemplateTap"
  | "releaseTemplateTap"
  | "closeNetworks"
>;

// The messages back into the port's plain data: protobuf checked the types, these the values
// protobuf cannot (a policy's mode, `enabled`), before the host sees them.

function policyOf(p: EgressPolicyMsg | undefined): EgressPolicy {
  const mode = NetworkMode.safeParse(p?.mode);
  if (!mode.success) throw new MachineRefusedError(`no egress mode named ${JSON.stringify(String(p?.mode).slice(0, 40))}`);
  return { mode: mode.data, allow: [...(p?.allow ?? [])], deny: [...(p?.deny ?? [])] };
}

function specOf(n: SandboxNetwork): SandboxNetworkSpec {
  return {
    sandboxId: n.sandboxId,
    slot: n.slot,
    enabled: n.enabled,
    policy: policyOf(n.policy),
    tunnels: { ...n.tunnels },
    generation: n.generation,
  };
}

function enabledOf(s: string): "auto" | "on" {
  if (s === "auto" || s === "on") return s;
  throw new MachineRefusedError(`networks are opened "auto" or "on", not ${JSON.stringify(s.slice(0, 40))}`);
}

const attachmentMsg = (a: NetworkAttachment): NetworkAttachmentMsg => create(NetworkAttachmentSchema, a);

function openedMsg(o: OpenedNetworks): OpenedNetworksMsg {
  return create(OpenedNetworksSchema, {
    result:
      o.subnet === null
        ? { case: "unavailable", value: o.unavailable }
        : { case: "open", value: { subnet: o.subnet, skipped: o.skipped, attached: o.attached.map(attachmentMsg) } },
  });
}

/**
 * The networks half of the MachineHostService (HostNetworks). `dataDir` is the worker's own state
 * directory for them: a caller's data dir names a folder on the caller's machine, never sent.
 * A caller that opens them again without closing them (its control plane restarted) gets them
 * closed first, kept (taps and rules stay for its live sandboxes), as a restarting server does.
 */
export function networkCalls(networks: HostNetworks, dataDir: string): NetworkCalls {
  let opened = false;
  return {
    openNetworks: (r) =>
      answer(async () => {
        const req: OpenNetworksRequest = {
          dataDir,
          ...(r.subnet !== undefined ? { subnet: r.subnet } : {}),
          enabled: enabledOf(r.enabled),
          dnsUpstreams: [...r.dnsUpstreams],
          ...(r.dnsRateLimit ? { dnsRateLimit: { perSecond: r.dnsRateLimit.perSecond, burst: r.dnsRateLimit.burst } } : {}),
          volumePorts: [...r.volumePorts],
          live: r.live.map(specOf),
        };
        await mkdir(dataDir, { recursive: true, mode: 0o700 });
        if (opened) await networks.close({ destroy: false });
        opened = false;
        const o = openedMsg(await networks.open(req));
        opened = o.result.case === "open";
        return o;
      }),
    attachNetwork: (r) => answer(async () => attachmentMsg(await networks.attach(specOf(r)))),
    updateNetwork: (r) =>
      answerEmpty(() => networks.update(r.sandboxId, { policy: policyOf(r.policy), generation: r.generation })),
    detachNetwork: (r) => answerEmpty(() => networks.detach(r.sandboxId)),
    acquireTemplateTap: () => answer(async () => ({ tap: await networks.taps.acquire() })),
    releaseTemplateTap: (r) => answerEmpty(() => networks.taps.release(r.tap)),
    closeNetworks: (r) =>
      answerEmpty(async () => {
        opened = false;
        await networks.close({ destroy: r.destroy });
      }),
  };
}

import { mkdir } from "node:fs/promises";
import type { ServiceImpl } from "@connectrpc/connect";
import type { MachineHostService } from "../gen/sandtree/host/v1/host_pb.js";
import type { HostNetworks, OpenNetworksRequest } from "../network/host-networks.js";
import { attachmentMsg, enabledOf, openedMsg, policyOf, specOf } from "./network-msgs.js";
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

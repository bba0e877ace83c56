import type { MachineHost } from "@sandtree/host";
import type { ServerConfigValues } from "./config.js";
import { defaultHost, defaultHostNetworks } from "./default-host.js";
import type { StartServerOptions } from "./server.js";
import type { Foundation } from "./server-foundation.js";
import { NetworkService } from "./services/network/network-service.js";
import type { UnwindStack } from "./unwind-stack.js";

/**
 * This process's own host and its sandbox networks (the local bundle's: see HostBundles): the
 * host given (the fake, a remote one: it jails and limits its own machines) or the default one,
 * and a NetworkService over the host's networks, started (rules and tunnels of the sandboxes still
 * active, before adoption; `notMine`: a peer's, on a shared store) and closed at the unwind. The
 * default host makes, serves and mounts volumes by name in `volumesDir` (bounded by `volumeImages`).
 */
export async function openLocalHost(
  cfg: ServerConfigValues,
  opts: StartServerOptions,
  f: Foundation,
  unwind: UnwindStack,
  o: { notMine: (() => Promise<Set<string>>) | null; volumesDir: string },
): Promise<{ host: MachineHost; network: NetworkService }> {
  const { store, log, accel, jail, blobs, volumeImages } = f;
  // The host's networks before the host: its resource limits need to know whether sandboxes have taps.
  const hosting = opts.host
    ? { given: opts.host, networks: opts.host.networks }
    : { given: null, networks: defaultHostNetworks(log) };
  const network = new NetworkService({
    store,
    log,
    networks: hosting.networks,
    dataDir: cfg.dataDir,
    config: {
      enabled: cfg.network,
      subnet: cfg.networkSubnet,
      defaultPolicy: cfg.networkDefault,
      dnsUpstreams: cfg.dnsUpstreams,
      dnsRateLimit: cfg.dnsRateLimit,
    },
  });
  // Every VM is gone by the time this runs: the rules, taps and resolver go too, and the host's
  // volume file server (its guests mounted it over these networks).
  unwind.push("sandbox networks", () => network.close({ destroy: true }).catch(() => {}));
  await network.start(o.notMine ? { notMine: await o.notMine() } : {});
  const host =
    hosting.given ??
    (await defaultHost({
      cfg,
      jail,
      accel,
      network: network.enabled,
      networks: hosting.networks,
      layersDir: blobs.localDir,
      volumesDir: o.volumesDir,
      volumeImages,
      log,
    }));
  return { host, network };
}

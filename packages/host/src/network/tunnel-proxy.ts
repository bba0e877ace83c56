import net from "node:net";
import { tunnelAddress } from "./addresses.js";
import type { SandboxNetSpec } from "./network-manager.js";

/**
 * A sandbox tunnel's host end: a TCP proxy listening on `listenHost` (the sandbox's gateway)
 * that only `allowFrom` (the sandbox's address) may use, relaying to `target` (HOST:PORT).
 * Half-open both ways: a client that shuts down its sending side after the request (nc,
 * HTTP/1.0 clients, many RPC protocols) still gets the whole answer; each end is passed on,
 * and both sockets go once either has fully closed.
 */
export async function listenTunnelProxy(opts: { listenHost: string; allowFrom: string; target: string }): Promise<net.Server> {
  const i = opts.target.lastIndexOf(":");
  const host = opts.target.slice(0, i);
  const port = Number(opts.target.slice(i + 1));
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    if (client.remoteAddress?.replace(/^::ffff:/, "") !== opts.allowFrom) {
      client.destroy();
      return;
    }
    const upstream = net.connect({ host, port, allowHalfOpen: true });
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end);
    upstream.on("error", end);
    client.on("close", end);
    upstream.on("close", end);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, opts.listenHost, () => resolve());
  });
  return server;
}

/** One proxy per tunnel (name -> HOST:PORT) on the sandbox's gateway; each added to `proxies` as it listens. */
export async function openTunnelProxies(
  spec: SandboxNetSpec,
  tunnels: Record<string, string>,
  proxies: net.Server[],
): Promise<void> {
  for (const [k, [, target]] of Object.entries(tunnels).entries()) {
    const port = Number(target.slice(target.lastIndexOf(":") + 1));
    const server = await listenTunnelProxy({ listenHost: spec.slot.gateway, allowFrom: spec.slot.address, target });
    proxies.push(server);
    const addr = server.address();
    const proxyPort = typeof addr === "object" && addr ? addr.port : 0;
    (spec.tunnels ??= []).push({ address: tunnelAddress(k), port, proxyPort });
  }
}

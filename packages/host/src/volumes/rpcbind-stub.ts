import { rmSync } from "node:fs";
import net from "node:net";

/**
 * A stand-in for rpcbind, for the file server alone. Debian's NFS-Ganesha registers every
 * program with rpcbind at start and exits when that fails; guests never ask rpcbind (they mount
 * with explicit ports), so a host rpcbind (port 111 on every interface) would only add a daemon.
 * The server answers every call on `socketPath` (SET, UNSET, ...) with an accepted reply and
 * the boolean TRUE; the file server is started in a mount namespace where this socket sits at
 * rpcbind's well-known path.
 */
export class RpcbindStub {
  private readonly server: net.Server;

  private constructor(server: net.Server) {
    this.server = server;
  }

  static async listen(socketPath: string): Promise<RpcbindStub> {
    rmSync(socketPath, { force: true });
    const server = net.createServer((sock) => {
      let buf = Buffer.alloc(0);
      sock.on("error", () => {});
      sock.on("data", (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        // ONC RPC over a stream: a 4-byte record mark (last-fragment bit + length), then the call.
        while (buf.length >= 4) {
          const len = buf.readUInt32BE(0) & 0x7fffffff;
          if (buf.length < 4 + len) break;
          const xid = len >= 4 ? buf.readUInt32BE(4) : 0;
          buf = buf.subarray(4 + len);
          sock.write(acceptedTrue(xid));
        }
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(socketPath, () => resolve());
    });
    return new RpcbindStub(server);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS, bool TRUE. */
function acceptedTrue(xid: number): Buffer {
  const words = [xid, 1, 0, 0, 0, 0, 1];
  const out = Buffer.alloc(4 + words.length * 4);
  out.writeUInt32BE(0x80000000 + words.length * 4, 0);
  for (const [i, w] of words.entries()) out.writeUInt32BE(w >>> 0, 4 + i * 4);
  return out;
}

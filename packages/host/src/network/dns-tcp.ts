/**
 * DNS over TCP for the resolver (RFC 7766): 2-octet length-prefixed messages, pipelined queries
 * answered as they complete, at most 16 in progress per connection (reading pauses beyond that),
 * an idle timeout, and a connection dropped when it buffers more than a well-behaved client would.
 */
import type net from "node:net";

const TCP_MAX_PIPELINE = 16;

/** Serves one accepted connection; `handle` answers a query (null: no reply) and never rejects. */
export function serveTcpConnection(socket: net.Socket, idleMs: number, handle: (msg: Buffer) => Promise<Buffer | null>): void {
  socket.setNoDelay(true);
  socket.setTimeout(idleMs, () => socket.destroy());
  let pending: Buffer = Buffer.alloc(0);
  let active = 0;
  const pump = () => {
    while (active < TCP_MAX_PIPELINE && pending.length >= 2 && !socket.destroyed) {
      const len = pending.readUInt16BE(0);
      if (pending.length < 2 + len) break;
      const msg = Buffer.from(pending.subarray(2, 2 + len));
      pending = pending.subarray(2 + len);
      active++;
      handle(msg)
        .then((reply) => {
          if (!reply || socket.destroyed) return;
          const frame = Buffer.allocUnsafe(2 + reply.length);
          frame.writeUInt16BE(reply.length, 0);
          reply.copy(frame, 2);
          socket.write(frame);
        })
        .finally(() => {
          active--;
          pump();
        });
    }
    if (active >= TCP_MAX_PIPELINE) socket.pause();
    else if (socket.isPaused() && !socket.destroyed) socket.resume();
  };
  socket.on("data", (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    // A full pipeline plus one maximal message is the most a well-behaved client buffers.
    if (pending.length > 2 * 65537) {
      socket.destroy();
      return;
    }
    pump();
  });
  socket.on("error", () => {});
}

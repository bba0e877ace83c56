import { Duplex } from "node:stream";
import { MachinePortError } from "../machine/machine.js";

/**
 * Two in-memory stream ends joined like a TCP connection: what one writes the other reads, a
 * write waits while the other's read buffer is full, ending one side ends the other's reading
 * (half-close; a side whose reading ended ends its writing too, as a net.Socket does by default),
 * and destroying one before it ended both ways destroys both.
 */
export function streamPair(): [Duplex, Duplex] {
  const waiting: Array<(() => void) | null> = [null, null];
  const ends: Duplex[] = [];
  const make = (me: 0 | 1): Duplex => {
    const peer = () => ends[1 - me] as Duplex;
    return new Duplex({
      allowHalfOpen: false,
      read() {
        const w = waiting[me];
        waiting[me] = null;
        w?.();
      },
      write(chunk: Buffer, _enc, cb) {
        if (peer().push(chunk)) cb();
        else waiting[1 - me] = cb;
      },
      final(cb) {
        peer().push(null);
        cb();
      },
      destroy(this: Duplex, err, cb) {
        // Torn down before both ways ended (not the close after a clean end): the peer goes too, as after a reset.
        const clean = !err && this.readableEnded && this.writableFinished;
        if (!clean && !peer().destroyed) peer().destroy();
        cb(err);
      },
    });
  };
  ends.push(make(0), make(1));
  return [ends[0] as Duplex, ends[1] as Duplex];
}

/** The ports a fake machine's commands listen on: a connection is an in-memory echo. */
export class FakePorts {
  private readonly listening = new Set<number>();

  /** Listens on `port` until the returned function is called. */
  listen(port: number): () => void {
    this.listening.add(port);
    return () => this.listening.delete(port);
  }

  connect(port: number): Duplex {
    if (!this.listening.has(port)) {
      throw new MachinePortError(`connecting to port ${port} of the guest: ECONNREFUSED`, port, true, "ECONNREFUSED");
    }
    const [client, server] = streamPair();
    server.on("error", () => {});
    server.pipe(server);
    return client;
  }

  close(): void {
    this.listening.clear();
  }
}

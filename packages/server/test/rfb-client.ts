// A minimal RFB (VNC) client over a WebSocket for tests: reads exact byte counts from binary
// frames, does the 3.7/3.8 handshake with security type None, and sends client messages.
import WebSocket from "ws";

export interface ServerInit {
  version: string;
  width: number;
  height: number;
  name: string;
}

export class RfbClient {
  private buf = Buffer.alloc(0);
  private waiter: (() => void) | null = null;
  private closed: Error | null = null;
  /** Bytes per pixel of the server's pixel format (from ServerInit). */
  private bytesPerPixel = 4;

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.waiter?.();
    });
    ws.on("close", (code, reason) => {
      this.closed = new Error(`the WebSocket closed (${code} ${reason.toString()})`);
      this.waiter?.();
    });
  }

  /** Opens the socket; rejects with the HTTP status of a refused upgrade (`HTTP 409 {...}`). */
  static open(url: string, protocols: string[], headers: Record<string, string> = {}): Promise<RfbClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, protocols, { headers });
      const client = new RfbClient(ws);
      ws.once("open", () => resolve(client));
      ws.once("unexpected-response", (_req, res) => {
        let body = "";
        res.on("data", (c: Buffer) => {
          body += c.toString();
        });
        res.on("end", () => reject(new Error(`HTTP ${res.statusCode} ${body}`)));
      });
      ws.once("error", reject);
    });
  }

  async read(n: number): Promise<Buffer> {
    while (this.buf.length < n) {
      if (this.closed) throw this.closed;
      await new Promise<void>((r) => {
        this.waiter = r;
      });
      this.waiter = null;
    }
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** ProtocolVersion, security None, ClientInit (shared), ServerInit. */
  async handshake(): Promise<ServerInit> {
    const version = (await this.read(12)).toString("latin1");
    if (!/^RFB 003\.00[78]\n$/.test(version)) throw new Error(`unexpected banner ${JSON.stringify(version)}`);
    this.ws.send(Buffer.from(version, "latin1"));
    const n = (await this.read(1))[0] ?? 0;
    if (n === 0) throw new Error(`the server refused: ${(await this.read((await this.read(4)).readUInt32BE(0))).toString()}`);
    const types = [...(await this.read(n))];
    if (!types.includes(1)) throw new Error(`no security type None among ${types.join(",")}`);
    this.ws.send(Buffer.from([1]));
    if (version.endsWith("008\n")) {
      const result = (await this.read(4)).readUInt32BE(0);
      if (result !== 0) throw new Error(`security result ${result}`);
    }
    this.ws.send(Buffer.from([1])); // ClientInit: shared
    const init = await this.read(24);
    this.bytesPerPixel = (init[4] ?? 32) / 8;
    const name = (await this.read(init.readUInt32BE(20))).toString("utf8");
    return { version: version.trim(), width: init.readUInt16BE(0), height: init.readUInt16BE(2), name };
  }

  pointer(x: number, y: number, buttons = 0): void {
    const m = Buffer.alloc(6);
    m.writeUInt8(5, 0);
    m.writeUInt8(buttons, 1);
    m.writeUInt16BE(x, 2);
    m.writeUInt16BE(y, 4);
    this.ws.send(m);
  }

  /**
   * Asks for a 1x1 update and waits for its FramebufferUpdate: the server handles a client's
   * messages in order, so every message sent before it has been processed by then.
   */
  async sync(): Promise<void> {
    const m = Buffer.alloc(10);
    m.writeUInt8(3, 0); // FramebufferUpdateRequest, not incremental, x=0 y=0 w=1 h=1
    m.writeUInt16BE(1, 6);
    m.writeUInt16BE(1, 8);
    this.ws.send(m);
    // Skip anything but a FramebufferUpdate (type 0): Bell (2), ServerCutText (3), SetColourMapEntries (1).
    for (;;) {
      const type = (await this.read(1))[0];
      if (type === 0) break;
      if (type === 2) continue;
      if (type === 3) {
        await this.read(3);
        await this.read((await this.read(4)).readUInt32BE(0));
        continue;
      }
      throw new Error(`unexpected server message ${type}`);
    }
    await this.read(1);
    const rects = (await this.read(2)).readUInt16BE(0);
    for (let i = 0; i < rects; i++) {
      const head = await this.read(12);
      const [w, h, enc] = [head.readUInt16BE(4), head.readUInt16BE(6), head.readInt32BE(8)];
      if (enc !== 0) throw new Error(`unexpected encoding ${enc} (only Raw was offered)`);
      await this.read(w * h * this.bytesPerPixel);
    }
  }

  close(): void {
    this.ws.close();
  }
}

import { type RawData, WebSocket } from "ws";

/** Above this many unsent bytes either way we stop reading the other side. */
const HIGH_WATER = 1024 * 1024;

/** A frame's bytes, whatever `ws` handed over. */
export function frameBytes(data: RawData): Buffer {
  return Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
}

/**
 * What a client sends, done in order (keystrokes, RFB input, control messages after the bytes
 * before them); past HIGH_WATER bytes not yet written the socket is no longer read.
 */
export function inputQueue(ws: WebSocket) {
  let chain = Promise.resolve();
  let pending = 0;
  return {
    /** Writes `buf` once what came before it is done (a failed write is dropped). */
    write(buf: Buffer, write: (buf: Buffer) => Promise<void>): void {
      pending += buf.length;
      if (pending > HIGH_WATER) ws.pause();
      chain = chain
        .then(() => write(buf))
        .catch(() => {})
        .finally(() => {
          pending -= buf.length;
          if (pending <= HIGH_WATER && ws.isPaused) ws.resume();
        });
    },
    /** Runs `step` once what came before it is done. */
    after(step: () => void): void {
      chain = chain.then(step);
    },
  };
}

/** Sends each chunk as a binary frame, waiting while too much is unsent; stops when the socket closed. */
export async function sendOutput(ws: WebSocket, output: AsyncIterable<Buffer | Uint8Array>): Promise<void> {
  for await (const chunk of output) {
    if (ws.readyState !== WebSocket.OPEN) break;
    if (ws.bufferedAmount < HIGH_WATER) ws.send(chunk, { binary: true });
    else await new Promise<void>((resolve) => ws.send(chunk, { binary: true }, () => resolve()));
  }
}

/**
 * Output chunks waiting for their reader. While nobody iterates (`attached` false) it holds at
 * most `max` bytes: what does not fit is dropped and counted.
 */
export class UnreadBuffer<C> {
  chunks: C[] = [];
  bytes = 0;
  dropped = 0;
  attached = false;

  /** Keeps what fits of `data` (all of it while attached) as `wrap` makes it; answers whether anything was kept. */
  push(data: Uint8Array, max: number, wrap: (keep: Uint8Array) => C): boolean {
    if (data.length === 0) return false;
    let keep = data;
    if (!this.attached) {
      const room = Math.max(0, max - this.bytes);
      if (room < data.length) {
        this.dropped += data.length - room;
        if (room === 0) return false;
        keep = data.subarray(0, room);
      }
    }
    this.chunks.push(wrap(keep));
    this.bytes += keep.length;
    return true;
  }
}

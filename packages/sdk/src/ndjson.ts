import { concatBytes } from "@sandtree/protocol";

/**
 * Splits a byte stream into NDJSON lines. Splits on the newline byte before decoding, so a
 * multi-byte UTF-8 character cut across two chunks is decoded whole.
 */
export class NdjsonDecoder {
  private pending: Uint8Array[] = [];
  private readonly text = new TextDecoder("utf-8", { fatal: false });
  /** Longest line accepted (the server's chunks are at most a few MiB once base64-encoded). */
  constructor(private readonly maxLineBytes = 64 * 1024 * 1024) {}
  private pendingBytes = 0;

  /** Feeds a chunk; returns the complete, non-empty lines it finished. */
  push(chunk: Uint8Array): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      this.pending.push(chunk.subarray(start, nl));
      this.emit(lines);
      start = nl + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.pendingBytes += rest.length;
      if (this.pendingBytes > this.maxLineBytes) {
        throw new Error(`an NDJSON line exceeded ${this.maxLineBytes} bytes`);
      }
      // Copy: the caller may reuse the chunk's buffer.
      this.pending.push(rest.slice());
    }
    return lines;
  }

  /** Call at end of stream: returns the last line when it had no trailing newline. */
  end(): string[] {
    const lines: string[] = [];
    if (this.pending.length > 0) this.emit(lines);
    return lines;
  }

  private emit(lines: string[]): void {
    const parts = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    const bytes = parts.length === 1 ? (parts[0] as Uint8Array) : concatBytes(parts);
    const line = this.text.decode(bytes).replace(/\r$/, "");
    if (line.trim() !== "") lines.push(line);
  }
}

import { EXEC_STREAM_CONTENT_TYPE, ExecEvent, ExecStreamDecoder, type ExecStreamEvent } from "@sandtree/protocol";
import { InvalidResponseError } from "./errors.js";
import { NdjsonDecoder } from "./ndjson.js";

/** What the SDK asks for: the binary stream, or NDJSON from a server that predates it. */
export const EXEC_STREAM_ACCEPT = `${EXEC_STREAM_CONTENT_TYPE}, application/x-ndjson;q=0.5`;

/** Turns the bytes of a streamed exec's answer into events, output as bytes. */
export interface ExecEventDecoder {
  push(chunk: Uint8Array): ExecStreamEvent[];
  end(): ExecStreamEvent[];
}

/** The decoder for the answer's content type. */
export function execEventDecoder(contentType: string | null): ExecEventDecoder {
  return contentType?.startsWith(EXEC_STREAM_CONTENT_TYPE) ? new BinaryDecoder() : new NdjsonEventDecoder();
}

class BinaryDecoder implements ExecEventDecoder {
  private readonly inner = new ExecStreamDecoder();
  push(chunk: Uint8Array): ExecStreamEvent[] {
    try {
      return this.inner.push(chunk);
    } catch (err) {
      throw new InvalidResponseError(`bad exec stream: ${(err as Error).message}`, { cause: err });
    }
  }
  end(): ExecStreamEvent[] {
    return [];
  }
}

class NdjsonEventDecoder implements ExecEventDecoder {
  private readonly lines = new NdjsonDecoder();
  push(chunk: Uint8Array): ExecStreamEvent[] {
    return this.lines.push(chunk).map(toEvent);
  }
  end(): ExecStreamEvent[] {
    return this.lines.end().map(toEvent);
  }
}

function toEvent(line: string): ExecStreamEvent {
  let event: ExecEvent;
  try {
    event = ExecEvent.parse(JSON.parse(line));
  } catch (err) {
    throw new InvalidResponseError(`unexpected exec event: ${line.slice(0, 200)}`, { cause: err });
  }
  if (event.type === "stdout" || event.type === "stderr") {
    return { type: event.type, data: Buffer.from(event.data, "base64") };
  }
  return event;
}

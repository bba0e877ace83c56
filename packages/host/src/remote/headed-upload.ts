import { toConnectError } from "./remote-errors.js";

/** A client-streamed upload's message: a header first, then the file's bytes. */
type UploadInput<H> = {
  input: { case: "header"; value: H } | { case: "data"; value: Uint8Array } | { case: undefined; value?: undefined };
};

/**
 * Splits a served upload (a file write) into its header and its bytes, read as the callee asks
 * for them. `what` names the upload in the error a stream without a header first gets.
 */
export async function headedUpload<H>(
  inputs: AsyncIterable<UploadInput<H>>,
  what: string,
): Promise<{ header: H; data: AsyncIterable<Uint8Array> }> {
  const it = inputs[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done || first.value.input.case !== "header")
    throw toConnectError(new Error(`${what}'s first message names the file`));
  async function* data(): AsyncIterable<Uint8Array> {
    for (;;) {
      const { value, done } = await it.next();
      if (done) return;
      if (value.input.case === "data") yield value.input.value;
    }
  }
  return { header: first.value.input.value, data: data() };
}

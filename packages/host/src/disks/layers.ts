import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { open, stat } from "node:fs/promises";
import { pipeline } from "node:stream/promises";
import { runCommand } from "../util/run-command.js";

/** sha256 of a file, streamed. */
export async function sha256File(file: string, opts: { signal?: AbortSignal } = {}): Promise<string> {
  const hash = createHash("sha256");
  await pipeline(createReadStream(file, { highWaterMark: 1024 * 1024 }), hash, opts.signal ? { signal: opts.signal } : {});
  return hash.digest("hex");
}

async function fsyncFile(file: string): Promise<void> {
  const fh = await open(file, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Copies a frozen qcow2 layer out of a sandbox's chain and points its backing file at
 * `backingName` (a name relative to the layer's own directory), so the stored layer does not
 * depend on where the sandbox lived. Only the header changes (`rebase -u`); the data is the
 * layer's own clusters, i.e. what changed since its parent. Returns sha256 and size.
 */
export async function exportLayer(
  frozen: string,
  dest: string,
  backingName: string,
  opts: { signal?: AbortSignal } = {},
): Promise<{ sha256: string; size: number }> {
  const signalOpt = opts.signal ? { signal: opts.signal } : {};
  await pipeline(createReadStream(frozen, { highWaterMark: 4 * 1024 * 1024 }), createWriteStream(dest), signalOpt);
  await runCommand(["qemu-img", "rebase", "-u", "-f", "qcow2", "-F", "qcow2", "-b", backingName, dest], signalOpt);
  await fsyncFile(dest);
  const { size } = await stat(dest);
  const sha256 = await sha256File(dest, signalOpt);
  return { sha256, size };
}

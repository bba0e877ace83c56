import { open } from "node:fs/promises";
import path from "node:path";

/** The tail of a machine's console log, and the whole log's size (bytes): `size > bytes` means cut. */
export interface ConsoleTail {
  text: string;
  size: number;
}

/** The most a tail may ask for (the API's largest `tail_bytes`): a served host refuses more. */
export const CONSOLE_TAIL_MAX_BYTES = 16 * 1024 * 1024;

/**
 * The last `bytes` of the console log in `logDir` (a MachineSpec.logDir of this host), read from
 * its end without reading the rest; a log that is not there (yet) is empty. For hosts whose
 * machines write their console to `logDir/console.log`.
 */
export async function readConsoleTail(logDir: string, bytes: number): Promise<ConsoleTail> {
  let file: Awaited<ReturnType<typeof open>>;
  try {
    file = await open(path.join(logDir, "console.log"), "r");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return { text: "", size: 0 };
    throw err;
  }
  try {
    const { size } = await file.stat();
    const n = Math.min(size, Math.max(0, Math.floor(bytes)));
    const buf = Buffer.alloc(n);
    const { bytesRead } = await file.read(buf, 0, n, size - n);
    return { text: buf.subarray(0, bytesRead).toString("utf8"), size };
  } finally {
    await file.close();
  }
}

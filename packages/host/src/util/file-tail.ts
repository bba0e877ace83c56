import { readFileSync, statSync } from "node:fs";

/** The last `bytes` of a file as text (a log's tail), or "" when it cannot be read. */
export function tailOfFile(file: string, bytes: number): string {
  try {
    const size = statSync(file).size;
    const buf = readFileSync(file);
    return buf.subarray(Math.max(0, size - bytes)).toString("utf8");
  } catch {
    return "";
  }
}

import { open } from "node:fs/promises";
import { SandtreeError } from "@sandtree/protocol";

export type TarEntryType = "file" | "hardlink" | "symlink" | "directory" | "other";

export interface TarEntry {
  /** The member name exactly as stored (pax `path` and GNU long names applied). */
  name: string;
  type: TarEntryType;
  linkname: string;
}

const BLOCK = 512;

function cstr(buf: Buffer, start: number, len: number): string {
  const slice = buf.subarray(start, start + len);
  const nul = slice.indexOf(0);
  return slice.subarray(0, nul === -1 ? len : nul).toString("utf8");
}

function numeric(buf: Buffer, start: number, len: number): number {
  const first = buf[start] ?? 0;
  if (first & 0x80) {
    // GNU base-256 for sizes over 8 GiB.
    let v = 0;
    for (let i = 1; i < len; i++) v = v * 256 + (buf[start + i] ?? 0);
    return v;
  }
  const s = cstr(buf, start, len).trim();
  return s ? Number.parseInt(s, 8) : 0;
}

function typeOf(flag: string): TarEntryType {
  switch (flag) {
    case "0":
    case "\0":
    case "":
    case "7":
      return "file";
    case "1":
      return "hardlink";
    case "2":
      return "symlink";
    case "5":
      return "directory";
    default:
      return "other";
  }
}

function parsePax(data: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let pos = 0;
  while (pos < data.length) {
    const space = data.indexOf(0x20, pos);
    if (space === -1) break;
    const len = Number.parseInt(data.subarray(pos, space).toString("ascii"), 10);
    if (!Number.isFinite(len) || len <= 0) break;
    const record = data.subarray(space + 1, pos + len - 1).toString("utf8");
    const eq = record.indexOf("=");
    if (eq > 0) out[record.slice(0, eq)] = record.slice(eq + 1);
    pos += len;
  }
  return out;
}

/**
 * Lists the members of an uncompressed tar file by reading only its headers, so whiteouts and
 * unsafe paths can be handled before GNU tar extracts anything.
 */
export async function listTarEntries(path: string): Promise<TarEntry[]> {
  const fh = await open(path, "r");
  try {
    const { size: fileSize } = await fh.stat();
    const entries: TarEntry[] = [];
    const header = Buffer.alloc(BLOCK);
    let offset = 0;
    let pax: Record<string, string> = {};
    let longName: string | undefined;
    let longLink: string | undefined;
    while (offset + BLOCK <= fileSize) {
      await fh.read(header, 0, BLOCK, offset);
      if (header.every((b) => b === 0)) break;
      offset += BLOCK;
      const size = numeric(header, 124, 12);
      const flag = String.fromCharCode(header[156] ?? 0);
      const dataLen = Math.ceil(size / BLOCK) * BLOCK;
      if (flag === "x" || flag === "L" || flag === "K") {
        if (size > 16 * 1024 * 1024) throw invalid(path, "oversized extended header");
        const data = Buffer.alloc(size);
        await fh.read(data, 0, size, offset);
        if (flag === "x") pax = parsePax(data);
        else if (flag === "L") longName = cstr(data, 0, size);
        else longLink = cstr(data, 0, size);
        offset += dataLen;
        continue;
      }
      if (flag === "g") {
        offset += dataLen;
        continue;
      }
      const magic = cstr(header, 257, 6);
      const prefix = magic.startsWith("ustar") ? cstr(header, 345, 155) : "";
      const base = cstr(header, 0, 100);
      const name = pax.path ?? longName ?? (prefix ? `${prefix}/${base}` : base);
      const linkname = pax.linkpath ?? longLink ?? cstr(header, 157, 100);
      const realSize = pax.size !== undefined ? Number(pax.size) : size;
      entries.push({ name, type: typeOf(flag), linkname });
      // Hard links and directories carry no data even when a size is recorded.
      const type = typeOf(flag);
      if (type === "file" || type === "other") offset += Math.ceil(realSize / BLOCK) * BLOCK;
      pax = {};
      longName = undefined;
      longLink = undefined;
    }
    return entries;
  } finally {
    await fh.close();
  }
}

function invalid(path: string, why: string): SandtreeError {
  return new SandtreeError("IMAGE_INVALID", `layer ${path}: ${why}`);
}

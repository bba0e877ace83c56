import { rm } from "node:fs/promises";
import path from "node:path";
import { checkFlatName } from "../util/flat-names.js";
import { type ConsoleTail, readConsoleTail } from "./console-tail.js";

/** The longest machine name a host takes (its run directory holds Unix sockets: paths are short). */
export const MACHINE_NAME_MAX = 64;

/**
 * `name` when it can name a machine's directories (a flat name, checkFlatName: at most
 * MACHINE_NAME_MAX characters); else VALIDATION_FAILED. Every host checks it before it touches a
 * file for a name, so a name never leaves the host's roots.
 */
export function checkMachineName(name: string): string {
  return checkFlatName(name, { max: MACHINE_NAME_MAX, field: "name", what: "a machine's name" });
}

/**
 * Where a host keeps its machines' files, each machine's under its name: its run directory
 * (sockets and pid file; removed when it stops, or by `discard`) and its log directory
 * (console.log and the VMM's log; kept after it ended).
 */
export class MachineDirs {
  constructor(
    /** Short (Unix socket paths are limited to 108 bytes). */
    readonly runRoot: string,
    readonly logRoot: string,
  ) {}

  runDir(name: string): string {
    return path.join(this.runRoot, checkMachineName(name));
  }

  logDir(name: string): string {
    return path.join(this.logRoot, checkMachineName(name));
  }

  /** The end of the console log of the machine `name` (see MachineHost.consoleTail). */
  async consoleTail(name: string, bytes: number): Promise<ConsoleTail> {
    return await readConsoleTail(this.logDir(name), bytes);
  }

  /** Removes what the machine `name` left in its run directory. Idempotent. */
  async discard(name: string): Promise<void> {
    await rm(this.runDir(name), { recursive: true, force: true });
  }
}

import path from "node:path";
import type { ServiceImpl } from "@connectrpc/connect";
import { SandtreeError } from "@sandtree/protocol";
import type { MachineHostService } from "../gen/sandtree/host/v1/host_pb.js";
import type { ConsoleTailRequest } from "../gen/sandtree/host/v1/host_resources_pb.js";
import { CONSOLE_TAIL_MAX_BYTES } from "../machine/console-tail.js";
import type { MachineHost } from "../machine/machine.js";
import { toConnectError } from "./remote-errors.js";

type LogCalls = Pick<ServiceImpl<typeof MachineHostService>, "consoleTail">;

/**
 * What a caller may ask: a log directory as an absolute, normalized path (no `..`, no doubled or
 * trailing slash: the one a spec named), and a tail of 1 byte to CONSOLE_TAIL_MAX_BYTES.
 */
function checked(r: ConsoleTailRequest): { logDir: string; bytes: number } {
  const { logDir, bytes } = r;
  if (
    !path.isAbsolute(logDir) ||
    logDir.includes("\0") ||
    path.normalize(logDir) !== logDir ||
    (logDir.endsWith("/") && logDir !== "/")
  )
    throw new SandtreeError("VALIDATION_FAILED", "a console's log directory is an absolute, normalized path on the worker", {
      field: "log_dir",
    });
  if (bytes < 1 || bytes > CONSOLE_TAIL_MAX_BYTES)
    throw new SandtreeError("VALIDATION_FAILED", `a console's tail is 1 to ${CONSOLE_TAIL_MAX_BYTES} bytes`, {
      field: "bytes",
    });
  return { logDir, bytes };
}

/** The logs half of the MachineHostService: machines' console logs, which outlive them. */
export function logCalls(host: MachineHost): LogCalls {
  return {
    consoleTail: async (r, ctx) => {
      try {
        const { logDir, bytes } = checked(r);
        const tail = await host.consoleTail(logDir, bytes, { signal: ctx.signal });
        return { text: tail.text, size: BigInt(tail.size) };
      } catch (err) {
        throw toConnectError(err);
      }
    },
  };
}

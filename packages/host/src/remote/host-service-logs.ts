import type { ServiceImpl } from "@connectrpc/connect";
import { SandtreeError } from "@sandtree/protocol";
import type { MachineHostService } from "../gen/sandtree/host/v1/host_pb.js";
import type { ConsoleTailRequest } from "../gen/sandtree/host/v1/host_resources_pb.js";
import { CONSOLE_TAIL_MAX_BYTES } from "../machine/console-tail.js";
import type { MachineHost } from "../machine/machine.js";
import { checkMachineName } from "../machine/machine-dirs.js";
import { toConnectError } from "./remote-errors.js";

type LogCalls = Pick<ServiceImpl<typeof MachineHostService>, "consoleTail">;

/**
 * What a caller may ask: a machine's name (the host reads the log in its own directory for it,
 * and refuses a name that could leave it) and a tail of 1 byte to CONSOLE_TAIL_MAX_BYTES.
 */
function checked(r: ConsoleTailRequest): { name: string; bytes: number } {
  const { machine: name, bytes } = r;
  if (bytes < 1 || bytes > CONSOLE_TAIL_MAX_BYTES)
    throw new SandtreeError("VALIDATION_FAILED", `a console's tail is 1 to ${CONSOLE_TAIL_MAX_BYTES} bytes`, {
      field: "bytes",
    });
  return { name: checkMachineName(name), bytes };
}

/** The logs half of the MachineHostService: machines' console logs, which outlive them. */
export function logCalls(host: MachineHost): LogCalls {
  return {
    consoleTail: async (r, ctx) => {
      try {
        const { name, bytes } = checked(r);
        const tail = await host.consoleTail(name, bytes, { signal: ctx.signal });
        return { text: tail.text, size: BigInt(tail.size) };
      } catch (err) {
        throw toConnectError(err);
      }
    },
  };
}

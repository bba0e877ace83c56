// The conformance suite against this machine's QEMU microVMs (sandtree/debian; three short VMs,
// two at a time). Without the guest's artifacts the suite fails and says why.
import path from "node:path";
import { createQemuHost } from "../../src/index.js";
import { volumesOfHost } from "./host-volumes-conformance.js";
import { qemuConformance } from "./qemu-subject.js";

qemuConformance("qemu", "stconf", async (host) => ({ host, close: async () => {} }));

/** A QEMU host for its volumes only (no machine starts): its directories in `dir`. */
function qemuHostIn(dir: string) {
  const layersDir = path.join(dir, "layers");
  return createQemuHost({
    runRoot: path.join(dir, "r"),
    logRoot: path.join(dir, "logs"),
    layersDir,
    volumesDir: path.join(dir, "volumes"),
  });
}

volumesOfHost("qemu", qemuHostIn);

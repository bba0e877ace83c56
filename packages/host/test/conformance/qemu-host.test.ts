// The conformance suite against this machine's QEMU microVMs (sandtree/debian; three short VMs,
// two at a time). Without the guest's artifacts the suite fails and says why.
import { qemuConformance } from "./qemu-subject.js";

qemuConformance("qemu", "stconf", async (host) => ({ host, close: async () => {} }));

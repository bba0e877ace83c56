// The conformance suite against a remote host whose worker runs this machine's QEMU microVMs:
// RemoteHost -> the host service on loopback -> createQemuHost (sandtree/debian; the same few
// short VMs as qemu-host.test.ts, two at a time).
import path from "node:path";
import { createQemuHost } from "../../src/index.js";
import { volumesOfHost } from "./host-volumes-conformance.js";
import { qemuConformance } from "./qemu-subject.js";
import { servedRemotely } from "./remote-subject.js";

qemuConformance("remote (worker serving the QEMU host)", "strconf", (qemu, _accel, blobs) =>
  // Whatever the suite left running on the worker is stopped there before it goes.
  servedRemotely(qemu, blobs, async (worker) => {
    await Promise.all(worker.served.all().map((m) => m.stop({ graceMs: 0 }).catch(() => {})));
  }),
);

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

volumesOfHost("remote (worker serving the QEMU host)", qemuHostIn, (qemu, blobs) => servedRemotely(qemu, blobs));

// The conformance suite against a remote host whose worker runs this machine's QEMU microVMs:
// RemoteHost -> the host service on loopback -> createQemuHost (sandtree/debian; the same few
// short VMs as qemu-host.test.ts, two at a time).
import { volumesOfHost } from "./host-volumes-conformance.js";
import { qemuConformance, qemuHostIn } from "./qemu-subject.js";
import { servedRemotely } from "./remote-subject.js";

qemuConformance("remote (worker serving the QEMU host)", "strconf", (qemu, _accel, blobs) =>
  // Whatever the suite left running on the worker is stopped there before it goes.
  servedRemotely(qemu, blobs, async (worker) => {
    await Promise.all(worker.served.all().map((m) => m.stop({ graceMs: 0 }).catch(() => {})));
  }),
);

volumesOfHost("remote (worker serving the QEMU host)", qemuHostIn, (qemu, blobs) => servedRemotely(qemu, blobs));

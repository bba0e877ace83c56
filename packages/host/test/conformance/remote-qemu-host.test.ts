// The conformance suite against a remote host whose worker runs this machine's QEMU microVMs:
// RemoteHost -> the host service on loopback -> createQemuHost (sandtree/debian; the same few
// short VMs as qemu-host.test.ts, two at a time).
import { connectRemoteHost, serveMachineHost } from "../../src/remote.js";
import { qemuConformance } from "./qemu-subject.js";

qemuConformance("remote (worker serving the QEMU host)", "strconf", async (qemu) => {
  const key = "stw_conformance-key";
  const worker = await serveMachineHost({ host: qemu, key: () => key });
  const host = await connectRemoteHost({ url: worker.url, key });
  return {
    host,
    close: async () => {
      // Whatever the suite left running on the worker is stopped there before it goes.
      await Promise.all(worker.served.all().map((m) => m.stop({ graceMs: 0 }).catch(() => {})));
      host.close();
      await worker.close();
    },
  };
});

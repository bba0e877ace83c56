// The conformance suite against a remote host: RemoteHost -> the host service on loopback ->
// a worker's FakeHost (no VM: fast, runs in CI beside fake-host.test.ts).
import { connectRemoteHost, serveMachineHost } from "../../src/remote.js";
import { fakeConformance } from "./fake-subject.js";

fakeConformance("remote (worker serving the fake host)", "sandtree-remote-conf", async (fake) => {
  const key = "stw_conformance-key";
  const worker = await serveMachineHost({ host: fake, key: () => key });
  const host = await connectRemoteHost({ url: worker.url, key });
  return {
    host,
    close: async () => {
      host.close();
      await worker.close();
    },
  };
});

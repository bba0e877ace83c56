// The conformance suites against a remote host: RemoteHost -> the host service on loopback ->
// a worker's FakeHost (no VM: fast, runs in CI beside fake-host.test.ts).

import path from "node:path";
import { FakeHost } from "../../src/fake.js";
import { fakeConformance } from "./fake-subject.js";
import { hostNetworksConformance } from "./host-networks-conformance.js";
import { volumesOfHost } from "./host-volumes-conformance.js";
import { servedRemotely } from "./remote-subject.js";

fakeConformance("remote (worker serving the fake host)", "sandtree-remote-conf", (fake, blobs) => servedRemotely(fake, blobs));
hostNetworksConformance("remote (worker serving the fake host)", async () => {
  const { host, close } = await servedRemotely(new FakeHost());
  // A path on the caller's machine: the worker opens its networks in its own directory.
  return { networks: host.networks, dataDir: "/nonexistent", close };
});
volumesOfHost(
  "remote (worker serving the fake host)",
  (dir) =>
    new FakeHost({ dir: path.join(dir, "host"), layersDir: path.join(dir, "layers"), volumesDir: path.join(dir, "volumes") }),
  (fake, blobs) => servedRemotely(fake, blobs),
);

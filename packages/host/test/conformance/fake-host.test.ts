// The conformance suites against the in-memory fake host (no VM: milliseconds).

import path from "node:path";
import { FakeHost } from "../../src/fake.js";
import { fakeConformance } from "./fake-subject.js";
import { hostNetworksConformance } from "./host-networks-conformance.js";
import { volumesOfHost } from "./host-volumes-conformance.js";

fakeConformance("fake", "sandtree-fake-conf", async (fake) => ({ host: fake, close: async () => {} }));
hostNetworksConformance("fake", async () => ({ networks: new FakeHost().networks, dataDir: "/nonexistent" }));
volumesOfHost(
  "fake",
  (dir) =>
    new FakeHost({ dir: path.join(dir, "host"), layersDir: path.join(dir, "layers"), volumesDir: path.join(dir, "volumes") }),
);

// The conformance suites against the in-memory fake host (no VM: milliseconds).
import { FakeHost } from "../../src/fake.js";
import { fakeConformance } from "./fake-subject.js";
import { hostNetworksConformance } from "./host-networks-conformance.js";

fakeConformance("fake", "sandtree-fake-conf", async (fake) => ({ host: fake, close: async () => {} }));
hostNetworksConformance("fake", async () => ({ networks: new FakeHost().networks, dataDir: "/nonexistent" }));

// The conformance suite against the in-memory fake host (no VM: milliseconds).
import { fakeConformance } from "./fake-subject.js";

fakeConformance("fake", "sandtree-fake-conf", async (fake) => ({ host: fake, close: async () => {} }));

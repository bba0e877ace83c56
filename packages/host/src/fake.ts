// The in-memory fake host ("@sandtree/host/fake"): no VM, for tests above the seam.
export { FakeHost } from "./fake/fake-host.js";
export { FakeMachine } from "./fake/fake-machine.js";

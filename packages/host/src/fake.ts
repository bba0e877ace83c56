// The in-memory fake host ("@sandtree/host/fake"): no VM, for tests above the seam.
export { FakeHost } from "./fake/fake-host.js";
export { FAKE_IMAGE_REFS, FakeImages, type FakeImagesOptions } from "./fake/fake-images.js";
export { FakeMachine } from "./fake/fake-machine.js";

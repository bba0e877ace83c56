// The conformance suite against a remote host: RemoteHost -> the host service on loopback ->
// a worker's FakeHost (no VM: fast, runs in CI beside fake-host.test.ts).
import { fakeConformance } from "./fake-subject.js";
import { servedRemotely } from "./remote-subject.js";

fakeConformance("remote (worker serving the fake host)", "sandtree-remote-conf", (fake) => servedRemotely(fake));

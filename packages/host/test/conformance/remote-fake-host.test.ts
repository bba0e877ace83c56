// The conformance suite against a remote host: RemoteHost -> the host service on loopback ->
// a worker's FakeHost (no VM: fast, runs in CI beside fake-host.test.ts).
import { describe, expect, it } from "vitest";
import { FakeHost } from "../../src/fake.js";
import { fakeConformance } from "./fake-subject.js";
import { servedRemotely } from "./remote-subject.js";

fakeConformance("remote (worker serving the fake host)", "sandtree-remote-conf", (fake) => servedRemotely(fake));

describe("a remote host's sandbox networks", () => {
  it("are not served over the host service yet, and opening them says so", async () => {
    const { host, close } = await servedRemotely(new FakeHost());
    try {
      const req = { dataDir: "/nonexistent", dnsUpstreams: [], live: [] };
      await expect(host.networks.open({ ...req, enabled: "auto" })).resolves.toEqual({
        subnet: null,
        unavailable: "networks of a remote host are not served yet",
      });
      await expect(host.networks.open({ ...req, enabled: "on" })).rejects.toThrow(
        "sandbox networking is unavailable: networks of a remote host are not served yet",
      );
    } finally {
      await close();
    }
  });
});

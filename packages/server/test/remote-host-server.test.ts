// The whole server on a remote host: its machines run on a "worker" (the host service over a
// FakeHost, on loopback) and every call of the services (start, exec, files, checkpoint with
// memory, fork, reset, delete) crosses the network through RemoteHost. Shows the services need
// nothing of a host but the interface, wherever it runs. No VM: about a second.
import { connectRemoteHost, type RemoteHost, type ServedHost, serveMachineHost } from "@sandtree/host";
import { FakeHost } from "@sandtree/host/fake";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fakeImages, lifeCycle } from "./fake-host-life.js";
import { startTestServer, type TestServer } from "./helpers.js";

const COUNT = 12;
const { images, cleanup } = fakeImages("b");

describe("the server on a remote host", () => {
  let t: TestServer;
  const fake = new FakeHost();
  let worker: ServedHost;
  let host: RemoteHost;

  beforeAll(async () => {
    worker = await serveMachineHost({ host: fake, key: () => "stw_server-test" });
    host = await connectRemoteHost({ url: worker.url, key: "stw_server-test" });
    t = await startTestServer({ images, host });
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    host?.close();
    await worker?.close();
    cleanup();
  }, 60_000);

  it(`creates, checkpoints, forks, resets and deletes ${COUNT} sandboxes through it`, { timeout: 120_000 }, async () => {
    await Promise.all(
      Array.from({ length: COUNT }, (_, i) =>
        lifeCycle(t, `r${i}`, i, async (id) => {
          const stat = await t.api("GET", `/v1/sandboxes/${id}/files/stat?path=/root/n`);
          expect(stat.body, JSON.stringify(stat.body)).toMatchObject({ type: "file", size: String(i).length + 1 });
        }),
      ),
    );
    // Every machine the server started on the worker is stopped there.
    expect(fake.starts).toBe(3 * COUNT);
    expect(fake.machines.size).toBe(0);
  });
});

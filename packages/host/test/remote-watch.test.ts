// A RemoteMachine follows its machine through the worker's Watch stream: a Watch that breaks (the
// worker's host service closed and served again, the connection cut) is opened again while the
// RemoteHost lives, and the worker's first answer decides: a machine it runs goes on, one that
// ended meanwhile ends here once. Over loopback to a FakeHost (no VM).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { FakeHost } from "../src/fake.js";
import type { Machine, MachineExit, MachineSpec } from "../src/index.js";
import { connectRemoteHost, type RemoteHost, type ServedHost, serveMachineHost } from "../src/remote.js";
import { fakeSpec } from "./conformance/fake-subject.js";

/** The key the caller sends; the worker's service answers `serviceKey` (another while the test adopts through it). */
const CALLER_KEY = "stw_caller";
const ADOPTER_KEY = "stw_adopter";

describe("remote machine's watch", () => {
  let dir: string;
  let fake: FakeHost;
  let worker: ServedHost;
  let port: number;
  let serviceKey = CALLER_KEY;
  let base: string;
  /** The caller's key calls: one per call it makes, a Watch opened again included. */
  let callerCalls = 0;
  const clients: RemoteHost[] = [];
  const spec = (name: string): MachineSpec => fakeSpec()(name, `${name}.qcow2`);

  const serve = async (): Promise<ServedHost> =>
    serveMachineHost({ host: fake, key: () => serviceKey, port, networksDir: path.join(dir, "networks") });

  const connect = async (key: string): Promise<RemoteHost> => {
    const host = await connectRemoteHost({
      url: worker.url,
      key: () => {
        if (key === CALLER_KEY) callerCalls++;
        return key;
      },
    });
    clients.push(host);
    return host;
  };

  const startOn = async (host: RemoteHost, name: string): Promise<{ m: Machine; exits: MachineExit[] }> => {
    await host.createDisk(await host.linkBase(base), `${name}.qcow2`, 1 << 30);
    const m = await host.start(spec(name));
    const exits: MachineExit[] = [];
    m.on("exit", (e: MachineExit) => exits.push(e));
    return { m, exits };
  };

  /**
   * The worker's host service closes (every Watch under way ends) and is served again on its port:
   * a new service, which knows the machines `adopt` names (adopted through it, as a control plane's
   * reconciler does) and, meanwhile, refuses the caller's key; `meanwhile` runs before it takes it again.
   */
  const serveAgain = async (adopt: Machine[], meanwhile: () => void | Promise<void> = () => {}): Promise<void> => {
    serviceKey = ADOPTER_KEY;
    await worker.close();
    worker = await serve();
    const adopter = await connect(ADOPTER_KEY);
    for (const m of adopt) await adopter.adopt({ name: m.name, pid: m.pid, deadlineMs: 5000, keepPaused: false });
    await meanwhile();
    adopter.close();
    serviceKey = CALLER_KEY;
  };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "sandtree-rewatch-"));
    fake = new FakeHost({ dir: path.join(dir, "host"), layersDir: dir });
    port = 0;
    worker = await serve();
    port = Number(new URL(worker.url).port);
    base = (await fake.images.resolve("sandtree/busybox", {})).base;
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await worker?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("opens a broken Watch again: the machine runs on, what changed meanwhile arrives, a later stop is one exit", async () => {
    const host = await connect(CALLER_KEY);
    const { m, exits } = await startOn(host, "r");
    const diskErrors: string[] = [];
    const told = new Promise<void>((resolve) =>
      m.on("disk-error", (why: string) => {
        diskErrors.push(why);
        resolve();
      }),
    );
    await serveAgain([m], () => {
      // A disk error that began while no Watch was open: the worker's first answer (its state) carries it.
      Object.defineProperty(fake.machines.get("r"), "diskError", { value: "no space left on the host", configurable: true });
    });
    await told;
    expect(diskErrors).toEqual(["no space left on the host"]);
    expect(m.exit).toBeNull();
    expect(m.controllable).toBe(true);

    await fake.machines.get("r")?.stop();
    await vi.waitFor(() => expect(exits).toHaveLength(1));
    expect(exits[0]).toMatchObject({ expected: true, reason: "stopped" });
    // A stop asked now answers that exit; none fires again.
    await expect(m.stop()).resolves.toMatchObject({ reason: "stopped" });
    expect(exits).toHaveLength(1);
  });

  it("ends a machine that ended while its Watch was broken once, with the worker's reason or why it is unknown", async () => {
    const host = await connect(CALLER_KEY);
    const known = await startOn(host, "e1");
    const unknown = await startOn(host, "e2");
    // e1's end is known to the service the caller comes back to (it adopted e1); e2 is unknown there.
    await serveAgain([known.m], () => {
      fake.machines.get("e1")?.forceKill();
      fake.machines.get("e2")?.forceKill();
    });
    await vi.waitFor(() => expect([known.exits.length, unknown.exits.length]).toEqual([1, 1]), { timeout: 10_000 });
    expect(known.exits[0]).toMatchObject({ expected: false, reason: "killed" });
    expect(unknown.exits[0]).toMatchObject({
      expected: false,
      reason: expect.stringMatching(/^the worker running it no longer knows it .*no machine named "e2" runs on this host/),
    });
    expect(known.m.controllable).toBe(false);
    expect(unknown.m.controllable).toBe(false);
  });

  it("stops opening the Watch once the RemoteHost closes: no exit, the machine runs on", async () => {
    const host = await connect(CALLER_KEY);
    const { m, exits } = await startOn(host, "c");
    await worker.close();
    // The caller tries again and again while nothing answers.
    const before = callerCalls;
    await vi.waitFor(() => expect(callerCalls).toBeGreaterThan(before + 1), { timeout: 10_000 });
    host.close();
    const closedAt = callerCalls;
    // Served again with the caller's key, not knowing `c`: a Watch opened now would end it.
    serviceKey = CALLER_KEY;
    worker = await serve();
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(callerCalls).toBe(closedAt);
    expect(exits).toEqual([]);
    expect(m.exit).toBeNull();
    expect(fake.machines.get("c")?.exit).toBeNull();
  });
});

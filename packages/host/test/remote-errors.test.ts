// What the API answers for a host's error is the same whether the host is in-process or behind a
// worker: each error the host may throw crosses the wire with its code, message and details.
import { ERROR_CODES, SandtreeError } from "@sandtree/protocol";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { FakeHost } from "../src/fake.js";
import {
  AgentClosedError,
  BlobCorruptError,
  DeadlineError,
  GuestError,
  hostErrorToApi,
  MachineRefusedError,
  MachineTimeoutError,
} from "../src/index.js";
import { fromConnectError } from "../src/remote/remote-errors.js";
import type { RemoteHost } from "../src/remote.js";
import { QmpClosedError, QmpCommandError, QmpTimeoutError } from "../src/vmm/qmp-client.js";
import { rawClient } from "./helpers/raw-import.js";
import { type ServedFake, serveFakeHost } from "./helpers/served-fake.js";

/** What the API renders of an error: its code, status, message and details (undefined: a plain 500). */
function rendered(err: unknown) {
  const api = hostErrorToApi(err);
  return api && { code: api.code, status: api.status, message: api.message, details: api.details };
}

describe("remote host errors", () => {
  let fixture: ServedFake;
  let fake: FakeHost;
  let host: RemoteHost;
  const key = "stw_errors-key";

  beforeAll(async () => {
    fixture = await serveFakeHost("sandtree-remote-errors-", () => key);
    ({ fake, host } = fixture);
  });
  afterAll(() => fixture?.close());

  /** The error a remote caller gets when the worker's host throws `err`. */
  async function overTheWire(err: Error): Promise<unknown> {
    const spy = vi.spyOn(fake, "hasLayer").mockRejectedValueOnce(err);
    try {
      return await host.hasLayer("l.qcow2").then(
        () => expect.unreachable("the call should fail"),
        (e: unknown) => e,
      );
    } finally {
      spy.mockRestore();
    }
  }

  it("carries every registry code with its details, as a SandtreeError", async () => {
    for (const code of ERROR_CODES) {
      const details = { path: "/f", limit_bytes: 10, nested: { list: [1, "a", true, null] } };
      const got = await overTheWire(new SandtreeError(code, `${code} happened`, details));
      expect(got, code).toBeInstanceOf(SandtreeError);
      expect(got, code).toMatchObject({ code, message: `${code} happened`, details });
    }
    // None stays none, and empty stays empty (the API renders `details: {}` for it).
    expect(await overTheWire(new SandtreeError("VOLUME_FULL", "full"))).toMatchObject({ details: undefined });
    expect(await overTheWire(new SandtreeError("VOLUME_FULL", "full", {}))).toMatchObject({ details: {} });
  });

  it("answers the API alike for each error the host throws, in-process or remote", async () => {
    const refusedByQmp = new MachineRefusedError("QMP GenericError: no", { cause: new QmpCommandError("GenericError", "no") });
    const cases: Error[] = [
      new SandtreeError("VOLUME_FULL", "/f: full", { path: "/f", volume: "v", limit_bytes: 10 }),
      new SandtreeError("HOST_DISK_FULL", "disk full", {}),
      new GuestError("ENOENT", 2, "no such file"),
      new AgentClosedError("the agent went"),
      new DeadlineError("the guest agent (frame type 3)", 500),
      new MachineTimeoutError("the VMM did not answer"),
      refusedByQmp,
      new MachineRefusedError("m has stopped"),
      new QmpTimeoutError("QMP query-status did not answer"),
      new QmpClosedError(),
      new BlobCorruptError("layers/x", "a".repeat(64), "b".repeat(64)),
    ];
    for (const err of cases) {
      const local = rendered(err);
      expect(local, err.name).toBeDefined();
      expect(rendered(await overTheWire(err)), err.name).toEqual(local);
    }
    expect(rendered(await overTheWire(refusedByQmp))).toMatchObject({ code: "VM_ERROR", details: { qmp_class: "GenericError" } });
    expect(rendered(await overTheWire(new DeadlineError("x", 5)))).toMatchObject({ code: "GUEST_ERROR" });
  });

  it("refuses a file call without its file part (protobuf cannot require it): VALIDATION_FAILED", async () => {
    const raw = rawClient(fixture.worker.url, key);
    const drain = async (s: AsyncIterable<unknown>) => {
      for await (const _ of s);
    };
    const calls = [
      () => raw.mkdir({ machine: "m" }),
      () => raw.remove({ machine: "m" }),
      () => drain(raw.readFile({ machine: "m" })),
      () => raw.volumeMkdir({ name: "v" }),
      () => raw.volumeRemovePath({ name: "v" }),
      () => drain(raw.volumeRead({ name: "v" })),
    ];
    for (const call of calls) {
      const err = await call().then(
        () => null,
        (e: unknown) => fromConnectError(e, "a file call"),
      );
      expect(err).toMatchObject({ code: "VALIDATION_FAILED" });
    }
  });
});

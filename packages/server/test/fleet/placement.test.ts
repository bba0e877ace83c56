// Placement as a pure function: filter, locality, spread, tie-break, pins and refusals.
import { describe, expect, it } from "vitest";
import { type Candidate, type PlacementAsk, rankHosts } from "../../src/services/fleet/placement.js";
import { refusal } from "./refusal.js";

const NOW = 1_000_000;
const clock = { nowMs: NOW, freshMs: 30_000 };

function host(name: string, over: Partial<Candidate> = {}): Candidate {
  return {
    id: `host_${name}`,
    name,
    state: "ACTIVE",
    capacity: { vcpus: 8, memory_mib: 16_384, disk_gib: 200, accel: "tcg" },
    usage: { vcpus: 0, memory_mib: 0, disk_gib: 0, placements: 0 },
    lastHeartbeatMs: NOW - 1000,
    images: new Set(),
    templates: new Set(),
    layers: new Set(),
    ...over,
  };
}

const ask: PlacementAsk = { vcpus: 2, memory_mib: 2048, disk_gib: 10 };
const names = (hs: Candidate[]) => hs.map((h) => h.name);

describe("placement", () => {
  it("keeps only ACTIVE hosts with a fresh heartbeat, the accelerator and room", () => {
    const hosts = [
      host("cordoned", { state: "CORDONED" }),
      host("lost", { state: "LOST" }),
      host("late", { lastHeartbeatMs: NOW - 31_000 }),
      host("full-cpu", { usage: { vcpus: 7, memory_mib: 0, disk_gib: 0, placements: 1 } }),
      host("full-mem", { usage: { vcpus: 0, memory_mib: 15_000, disk_gib: 0, placements: 1 } }),
      host("full-disk", { usage: { vcpus: 0, memory_mib: 0, disk_gib: 195, placements: 1 } }),
      host("ok"),
    ];
    expect(names(rankHosts(hosts, ask, clock))).toEqual(["ok"]);
    expect(
      names(
        rankHosts(
          [...hosts, host("kvm", { capacity: { ...host("x").capacity, accel: "kvm" } })],
          { ...ask, accel: "kvm" },
          clock,
        ),
      ),
    ).toEqual(["kvm"]);
  });

  it("prefers the checkpoint's layers, then the template, then the image, whatever the free room", () => {
    const busy = { vcpus: 6, memory_mib: 0, disk_gib: 0, placements: 3 };
    const hosts = [
      host("empty"),
      host("image", { usage: busy, images: new Set(["sha256:i"]) }),
      host("template", { usage: busy, templates: new Set(["t"]), images: new Set(["sha256:i"]) }),
      host("one-layer", { usage: busy, layers: new Set(["l1"]) }),
      host("two-layers", { usage: busy, layers: new Set(["l1", "l2"]) }),
    ];
    const full: PlacementAsk = { ...ask, image_digest: "sha256:i", template_key: "t", layers: ["l1", "l2"] };
    expect(names(rankHosts(hosts, full, clock))).toEqual(["two-layers", "one-layer", "template", "image", "empty"]);
    expect(names(rankHosts(hosts, ask, clock))[0]).toBe("empty");
    // Keeping only the best few gives the same head as ranking them all.
    expect(names(rankHosts(hosts, full, clock, 2))).toEqual(["two-layers", "one-layer"]);
    expect(names(rankHosts([...hosts].reverse(), full, clock, 3))).toEqual(["two-layers", "one-layer", "template"]);
  });

  it("spreads by the scarcest resource left, and breaks ties by name", () => {
    const hosts = [
      host("c"),
      host("b"),
      host("half-mem", { usage: { vcpus: 0, memory_mib: 8192, disk_gib: 0, placements: 1 } }),
      host("a"),
      host("some-cpu", { usage: { vcpus: 2, memory_mib: 0, disk_gib: 0, placements: 1 } }),
    ];
    expect(names(rankHosts(hosts, ask, clock))).toEqual(["a", "b", "c", "some-cpu", "half-mem"]);
    expect(names(rankHosts([...hosts].reverse(), ask, clock))).toEqual(["a", "b", "c", "some-cpu", "half-mem"]);
  });

  it("a pin is the only candidate; unknown is HOST_NOT_FOUND, unfit NO_CAPACITY, never another host", () => {
    const hosts = [
      host("a"),
      host("b", { state: "CORDONED" }),
      host("c", { usage: { vcpus: 8, memory_mib: 0, disk_gib: 0, placements: 4 } }),
    ];
    expect(names(rankHosts(hosts, { ...ask, host: "a" }, clock))).toEqual(["a"]);
    expect(refusal(() => rankHosts(hosts, { ...ask, host: "zz" }, clock))).toMatchObject({ code: "HOST_NOT_FOUND", status: 404 });
    expect(refusal(() => rankHosts(hosts, { ...ask, host: "b" }, clock))).toMatchObject({
      code: "NO_CAPACITY",
      status: 503,
      details: { host: "b", reason: "not_active" },
    });
    expect(refusal(() => rankHosts(hosts, { ...ask, host: "c" }, clock)).details).toEqual({ host: "c", reason: "full" });
  });

  it("no host fits: NO_CAPACITY counting why each was refused", () => {
    const err = refusal(() =>
      rankHosts([host("a", { state: "LOST" }), host("b", { lastHeartbeatMs: 0 }), host("c")], { ...ask, vcpus: 9 }, clock),
    );
    expect(err).toMatchObject({ code: "NO_CAPACITY", details: { hosts: 3, full: 1, not_active: 1, stale: 1, accel: 0 } });
    expect(refusal(() => rankHosts([], ask, clock)).details).toMatchObject({ hosts: 0 });
  });
});

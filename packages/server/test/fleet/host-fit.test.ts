// The fit check as a pure function: a size no host could hold even empty is refused, naming the
// host that comes closest; a busy fleet is not its business (placement's NO_CAPACITY).
import { describe, expect, it } from "vitest";
import { checkFits, checkFitsAmong, type SizedHost } from "../../src/services/fleet/host-fit.js";
import { refusal } from "./refusal.js";

const host = (name: string, vcpus: number, memory_mib: number, disk_gib: number): SizedHost => ({
  name,
  capacity: { vcpus, memory_mib, disk_gib, accel: "tcg" },
});

describe("checkFits", () => {
  const fleet = [host("small", 2, 4096, 50), host("big", 16, 65_536, 20), host("wide", 64, 8192, 500)];

  it("takes a size one host holds, whichever resources the others lack", () => {
    expect(() => checkFits(fleet, { vcpus: 16, memory_mib: 65_536, disk_gib: 20 })).not.toThrow();
    expect(() => checkFits(fleet, { vcpus: 32, memory_mib: 8192, disk_gib: 400 })).not.toThrow();
    expect(() => checkFits([], { vcpus: 999, memory_mib: 1 << 30, disk_gib: 1 << 20 })).not.toThrow();
  });

  it("refuses what no single host holds (each resource fits somewhere, never all on one) with 422", () => {
    const e = refusal(() => checkFits(fleet, { vcpus: 32, memory_mib: 32_768, disk_gib: 10 }));
    expect([e.code, e.status]).toEqual(["EXCEEDS_HOST_CAPACITY", 422]);
    // big lacks vCPUs only, wide memory only: the one short of the fewest, then the most memory.
    expect(e.details.largest).toEqual({ host: "big", vcpus: 16, memory_mib: 65_536, disk_gib: 20 });
    expect(e.message).toBe("no host can hold 32 vCPUs: the largest host, big, has 16 vCPUs");
  });

  it("names every resource the named host lacks, memory in GiB", () => {
    const e = refusal(() => checkFits([host("local", 2, 24_064, 72)], { vcpus: 4, memory_mib: 102_400, disk_gib: 100 }));
    expect(e.message).toBe(
      "no host can hold 4 vCPUs, 100 GiB of memory, 100 GiB of disk: the only host, local, has 2 vCPUs, 23.5 GiB of memory, 72 GiB of free disk",
    );
    expect(e.details.exceeds).toEqual(["vcpus", "memory", "disk"]);
  });

  it("does not judge disk on a host that reports none, and leaves LOST and ineligible hosts out", () => {
    expect(() => checkFits([host("nodisk", 2, 4096, 0)], { vcpus: 1, memory_mib: 512, disk_gib: 500 })).not.toThrow();
    const hosts = [
      { ...host("gone", 64, 1 << 20, 1000), id: "h1", state: "LOST" as const },
      { ...host("other", 64, 1 << 20, 1000), id: "h2", state: "ACTIVE" as const },
      { ...host("local", 2, 4096, 50), id: "h3", state: "CORDONED" as const },
    ];
    const ask = { vcpus: 8, memory_mib: 8192, disk_gib: 10 };
    expect(() => checkFitsAmong(hosts, ask, () => true)).not.toThrow();
    const e = refusal(() => checkFitsAmong(hosts, ask, (id) => id !== "h2"));
    expect(e.details.largest.host).toBe("local");
  });
});

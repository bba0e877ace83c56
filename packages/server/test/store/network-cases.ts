import { expect, it } from "vitest";
import { iso, NOW, networkRow, type StoreContext } from "./fixtures.js";

/** Sandbox network rows and the address pool's slots. */
export function networkCases(ctx: StoreContext): void {
  it("writes a sandbox's network row and replaces it whole", async () => {
    const s = ctx.store;
    expect(await s.getNetwork("sb-a")).toBeUndefined();
    const row = networkRow("sb-a");
    await s.putNetwork(row);
    expect(await s.getNetwork("sb-a")).toEqual(row);
    const changed = networkRow("sb-a", {
      enabled: false,
      mode: "denylist",
      allowlist: [],
      denylist: ["169.254.169.254"],
      tunnels: {},
      generation: 2,
      applied: true,
      updated_at: iso(NOW + 1_000),
    });
    await s.putNetwork(changed);
    expect(await s.getNetwork("sb-a")).toEqual(changed);
    expect(await s.getNetwork("sb-b")).toBeUndefined();
  });

  it("allocates the lowest free slot once per sandbox, refuses a full pool and reuses released slots", async () => {
    const s = ctx.store;
    for (const id of ["sb-a", "sb-b", "sb-c", "sb-d"]) await s.putNetwork(networkRow(id));
    expect(await s.listSlottedNetworks()).toEqual([]);
    expect(await s.allocateNetworkSlot("sb-a", 3)).toBe(0);
    expect(await s.allocateNetworkSlot("sb-b", 3)).toBe(1);
    // Asking again answers the slot the sandbox holds.
    expect(await s.allocateNetworkSlot("sb-a", 3)).toBe(0);
    expect(await s.allocateNetworkSlot("sb-c", 3)).toBe(2);
    expect(await s.allocateNetworkSlot("sb-d", 3)).toBeNull();
    expect(await s.getNetwork("sb-d")).toMatchObject({ slot: null });
    const slotted = await s.listSlottedNetworks();
    expect(Object.fromEntries(slotted.map((r) => [r.sandbox_id, r.slot]))).toEqual({ "sb-a": 0, "sb-b": 1, "sb-c": 2 });
    expect(slotted.find((r) => r.sandbox_id === "sb-a")).toEqual({ ...networkRow("sb-a"), slot: 0 });

    // Releasing frees the slot and marks the rules as no longer applied; the policy stays.
    await s.putNetwork({ ...((await s.getNetwork("sb-b")) ?? networkRow("sb-b")), applied: true });
    await s.releaseNetworkSlot("sb-b");
    expect(await s.getNetwork("sb-b")).toEqual({ ...networkRow("sb-b"), slot: null, applied: false });
    await s.releaseNetworkSlot("sb-b");
    await s.releaseNetworkSlot("sb-missing");
    expect(await s.allocateNetworkSlot("sb-d", 3)).toBe(1);
    expect((await s.listSlottedNetworks()).map((r) => r.sandbox_id).sort()).toEqual(["sb-a", "sb-c", "sb-d"]);
  });

  it("never gives two sandboxes one slot, even when they ask together", async () => {
    const s = ctx.store;
    const sandboxes = Array.from({ length: 6 }, (_, i) => `sb-${i}`);
    for (const id of sandboxes) await s.putNetwork(networkRow(id));
    const slots = await Promise.all(sandboxes.map((id) => s.allocateNetworkSlot(id, 4)));
    const given = slots.filter((x): x is number => x !== null);
    expect(given.sort()).toEqual([0, 1, 2, 3]);
    expect(slots.filter((x) => x === null)).toHaveLength(2);
  });
}

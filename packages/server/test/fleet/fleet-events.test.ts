import { describe, expect, it } from "vitest";
import { FleetEvents } from "../../src/services/fleet/fleet-events.js";
import type { LostHost } from "../../src/store/host-store.js";

const lostHost = { host: { id: "h1", name: "w1" }, sandboxIds: ["sb-1"] } as unknown as LostHost;

describe("FleetEvents", () => {
  it("tells a lost host's parts stage after stage (hosts, sandboxes, volumes), whatever order they subscribed in", async () => {
    const events = new FleetEvents();
    const heard: string[] = [];
    // Built in the composition's order: the lost host's sandboxes, its volumes, then the workers' bundles.
    events.on("lost", "sandboxes", async (l) => {
      await new Promise((r) => setTimeout(r, 5));
      heard.push(`sandboxes ended: ${l.sandboxIds.join(",")}`);
    });
    events.on("lost", "volumes", (l) => {
      heard.push(`volumes marked on ${l.host.id}`);
    });
    events.on("lost", "hosts", (l) => {
      heard.push(`bundle of ${l.host.name} closed`);
    });
    events.on("reaped", "hosts", () => {
      heard.push("not a lost host's");
    });
    await events.emit("lost", lostHost);
    expect(heard).toEqual(["bundle of w1 closed", "sandboxes ended: sb-1", "volumes marked on h1"]);
  });

  it("keeps the subscription order within a stage, and stops at the first failure, which it throws", async () => {
    const events = new FleetEvents();
    const heard: string[] = [];
    events.on("reaped", "sandboxes", () => {
      heard.push("taken over");
    });
    events.on("reaped", "hosts", () => {
      heard.push("first opened");
    });
    events.on("reaped", "hosts", () => {
      throw new Error("the second failed");
    });
    await expect(events.emit("reaped")).rejects.toThrow("the second failed");
    expect(heard).toEqual(["first opened"]);
    events.on("joined", "hosts", (hostId, url) => {
      heard.push(`${hostId} at ${url}`);
    });
    await events.emit("joined", "h2", "http://127.0.0.1:1");
    expect(heard).toEqual(["first opened", "h2 at http://127.0.0.1:1"]);
  });
});

// Rates asked for together go in one `ip -batch` and one `tc -batch`, and a failing one (its tap
// gone) fails alone: the others' rates are still in place. Real taps (root; no VM).
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { applyTapRate, ifbNameOf, removeTapRate } from "../src/limits/tap-rate.js";

const root = typeof process.getuid === "function" && process.getuid() === 0;
const tag = randomBytes(2).toString("hex");
const taps = [0, 1, 2].map((i) => `sttb${tag}-${i}`);
const qdiscs = (dev: string) => execFileSync("tc", ["qdisc", "show", "dev", dev], { encoding: "utf8" });

afterAll(async () => {
  for (const t of taps) {
    await removeTapRate(t);
    try {
      execFileSync("ip", ["link", "del", t], { stdio: "ignore" });
    } catch {}
  }
});

describe.skipIf(!root)("tap rates applied together", () => {
  it("puts each rate on its tap and ifb; a tap that is gone fails alone", async () => {
    for (const t of taps.slice(0, 2)) execFileSync("ip", ["tuntap", "add", "dev", t, "mode", "tap"]);
    // taps[2] does not exist: its lines fail, in the joint run and then alone.
    const results = await Promise.allSettled(taps.map((t, i) => applyTapRate(t, 10 * (i + 1))));
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "rejected"]);
    for (const [i, t] of taps.slice(0, 2).entries()) {
      expect(qdiscs(t)).toContain(`rate ${10 * (i + 1)}Mbit`);
      expect(qdiscs(ifbNameOf(t))).toContain(`rate ${10 * (i + 1)}Mbit`);
    }
  });

  it("drops a caller aborted while it waits", async () => {
    const slow = applyTapRate(taps[0] as string, 30);
    const ac = new AbortController();
    const waiting = applyTapRate(taps[1] as string, 40, { signal: ac.signal });
    ac.abort(new Error("gone"));
    await expect(waiting).rejects.toThrow("gone");
    await slow;
    expect(qdiscs(taps[1] as string)).toContain("rate 20Mbit");
  });
});

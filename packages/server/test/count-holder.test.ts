import { describe, expect, it } from "vitest";
import { countHolder } from "../src/services/support/count-holder.js";

describe("countHolder", () => {
  it("counts holders per key, drops the key at zero, and each release counts once", () => {
    const counts = new Map<string, number>();
    const a = countHolder(counts, "x");
    const b = countHolder(counts, "x");
    expect(counts.get("x")).toBe(2);
    expect(a()).toBe(true);
    expect(a()).toBe(false);
    expect(counts.get("x")).toBe(1);
    expect(b()).toBe(true);
    expect(counts.has("x")).toBe(false);
  });
});

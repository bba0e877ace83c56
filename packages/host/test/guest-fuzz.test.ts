import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const GUEST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../guest");

describe("guest frame parser under libFuzzer", () => {
  it("survives 20 seconds of fuzzing without a crash", { timeout: 300_000 }, async () => {
    const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn("make", ["-s", "-C", GUEST, "fuzz-run", "SECONDS=20"], { stdio: ["ignore", "pipe", "pipe"] });
      let output = "";
      child.stdout.on("data", (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
      child.stderr.on("data", (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
      child.on("close", (c) => resolve({ code: c, output }));
    });
    expect(code, output).toBe(0);
    expect(output).toMatch(/Done \d+ runs/);
    expect(output).not.toMatch(/ERROR: (AddressSanitizer|libFuzzer)/);
  });
});

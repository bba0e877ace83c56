import { describe, expect, it } from "vitest";
import { apiErrorFrom } from "../src/errors.js";

const notRunning = (status?: string) =>
  apiErrorFrom(409, {
    code: "SANDBOX_NOT_RUNNING",
    message: `sandbox sb-hzs3n4xqkrgpkpys is ${status ?? "?"}, not RUNNING`,
    ...(status ? { details: { id: "sb-hzs3n4xqkrgpkpys", status } } : {}),
  }).message;

describe("error hints point the right way (#21 item 8)", () => {
  it("SANDBOX_NOT_RUNNING: resume a PAUSED sandbox, wait for a starting one, start anew after the end", () => {
    expect(notRunning("PAUSED")).toContain("resume it");
    expect(notRunning("PROVISIONING")).toContain("still starting");
    for (const ended of ["TERMINATED", "ERROR", "TIMEOUT"]) {
      expect(notRunning(ended)).toContain("has ended");
      expect(notRunning(ended)).not.toContain("waitForCreation");
    }
  });

  it("REGISTRY_UNREACHABLE is not told to pull the image first", () => {
    const e = apiErrorFrom(502, { code: "REGISTRY_UNREACHABLE", message: "registry 127.0.0.1:1 unreachable" });
    expect(e.message).toContain("check the registry's address");
    expect(e.message).not.toContain("pull it");
  });
});

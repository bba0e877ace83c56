import { hostCpuSignature, setKvmCpuModel } from "@sandtree/host";
import { describe, expect, it } from "vitest";
import { machineOf, nestedOfMachine, refuseOtherMachine } from "../src/services/sandboxes/machine-identity.js";

// What a memory checkpoint records of its machine, and the refusal of a state saved elsewhere:
// no VM needed (the KVM path itself runs in kvm-nested.test.ts).
describe("a memory state's machine", () => {
  it("is the accelerator, under KVM with the guest CPU, and +nested", () => {
    expect(machineOf("tcg", false)).toBe("tcg");
    expect(machineOf("tcg", true)).toBe("tcg+nested");
    expect(machineOf("kvm", false)).toBe(`kvm:host/${hostCpuSignature()}`);
    try {
      setKvmCpuModel("EPYC-Milan");
      expect(machineOf("kvm", true)).toBe("kvm:EPYC-Milan+nested");
      expect(nestedOfMachine("kvm:EPYC-Milan+nested")).toBe(true);
    } finally {
      setKvmCpuModel("host");
    }
  });

  it("refuses a state saved on another accelerator or CPU with MEMORY_STATE_INCOMPATIBLE", () => {
    const into = { accel: "kvm", nested: false };
    expect(() => refuseOtherMachine({ id: "ck", machine: machineOf("kvm", false) }, into, "x")).not.toThrow();
    for (const machine of ["tcg", "kvm:host/AuthenticAMD-25-1-1-000000000000", "kvm:EPYC-Milan"]) {
      expect(() => refuseOtherMachine({ id: "ck", machine }, into, "x")).toThrow(
        expect.objectContaining({ code: "MEMORY_STATE_INCOMPATIBLE" }),
      );
    }
    // A checkpoint without a record (older servers) is not refused.
    expect(() => refuseOtherMachine({ id: "ck", machine: null }, into, "x")).not.toThrow();
  });
});

import { describe, expect, it } from "vitest";
import { nestedSupport } from "../src/machine/nested.js";
import { cpuIdentity, hostCpuSignature, kvmCpuModel, setKvmCpuModel } from "../src/vmm/cpu-identity.js";
import { buildQemuArgs, cpuKey, cpuModel, kernelCmdline } from "../src/vmm/qemu-args.js";
import { TINY_QEMU_SPEC } from "./helpers/qemu-spec.js";

describe("the guest CPU", () => {
  it("hides hardware virtualization unless nesting is asked for", () => {
    expect(cpuModel("tcg", false)).toMatch(/-svm/);
    expect(cpuModel("tcg", true)).toMatch(/\+svm,\+npt/);
    expect(cpuModel("kvm", false)).toBe("host,-vmx,-svm");
    expect(cpuModel("kvm", true)).toBe("host");
  });

  it("is what QEMU is started with, and a nested guest loads KVM at boot", () => {
    const spec = TINY_QEMU_SPEC;
    const cpuOf = (args: string[]) => args[args.indexOf("-cpu") + 1];
    expect(cpuOf(buildQemuArgs(spec))).toBe(cpuModel("tcg", false));
    expect(cpuOf(buildQemuArgs({ ...spec, nested: true }))).toBe(cpuModel("tcg", true));
    expect(kernelCmdline(spec)).not.toContain("sandtree.kvm");
    expect(kernelCmdline({ ...spec, nested: true })).toContain("sandtree.kvm=on");
  });

  it("under KVM is the host's CPU, or the fleet's named model whole (enforce)", () => {
    expect(kvmCpuModel()).toBe("host");
    expect(cpuIdentity("tcg")).toBe("tcg");
    expect(cpuIdentity("kvm")).toBe(`host/${hostCpuSignature()}`);
    // A TCG key is the model alone (its templates keep their keys); a KVM key names the CPU.
    expect(cpuKey("tcg", false)).toBe(cpuModel("tcg", false));
    expect(cpuKey("kvm", false)).toBe(`host,-vmx,-svm@host/${hostCpuSignature()}`);
    try {
      setKvmCpuModel("EPYC-Milan");
      expect(cpuModel("kvm", false)).toBe("EPYC-Milan,-vmx,-svm,enforce");
      expect(cpuModel("kvm", true)).toBe("EPYC-Milan,enforce");
      expect(cpuIdentity("kvm")).toBe("EPYC-Milan");
      expect(cpuKey("kvm", true)).toBe("EPYC-Milan,enforce@EPYC-Milan");
      expect(() => setKvmCpuModel("host,+svm")).toThrow(/CPU model name/);
    } finally {
      setKvmCpuModel("host");
    }
  });

  it("'s signature tells CPUs apart by vendor, family, model, stepping and flags", () => {
    const info = (model: string, flags: string) =>
      `processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: ${model}\nstepping\t: 8\nflags\t\t: ${flags}\n\nprocessor\t: 1\n`;
    const a = hostCpuSignature(info("143", "fpu sse avx512f"));
    expect(a).toMatch(/^GenuineIntel-6-143-8-[0-9a-f]{12}$/);
    expect(hostCpuSignature(info("143", "avx512f fpu sse"))).toBe(a);
    expect(hostCpuSignature(info("143", "fpu sse"))).not.toBe(a);
    expect(hostCpuSignature(info("106", "fpu sse avx512f"))).not.toBe(a);
  });

  it("is nested under KVM only where the host's KVM module allows it", () => {
    const params = (files: Record<string, string>) => (f: string) => files[f] ?? null;
    expect(nestedSupport("tcg", params({})).ok).toBe(true);
    expect(nestedSupport("kvm", params({ "/sys/module/kvm_intel/parameters/nested": "Y\n" })).ok).toBe(true);
    expect(nestedSupport("kvm", params({ "/sys/module/kvm_amd/parameters/nested": "1\n" })).ok).toBe(true);
    const off = nestedSupport("kvm", params({ "/sys/module/kvm_intel/parameters/nested": "N\n" }));
    expect(off).toEqual({ ok: false, why: "kvm_intel is loaded with nested=N" });
    expect(nestedSupport("kvm", params({})).why).toContain("neither");
  });
});

import { describe, expect, it } from "vitest";
import { nestedSupport } from "../src/machine/nested.js";
import { buildQemuArgs, cpuModel, kernelCmdline } from "../src/vmm/qemu-args.js";

describe("the guest CPU", () => {
  it("hides hardware virtualization unless nesting is asked for", () => {
    expect(cpuModel("tcg", false)).toMatch(/-svm/);
    expect(cpuModel("tcg", true)).toMatch(/\+svm,\+npt/);
    expect(cpuModel("kvm", false)).toBe("host,-vmx,-svm");
    expect(cpuModel("kvm", true)).toBe("host");
  });

  it("is what QEMU is started with, and a nested guest loads KVM at boot", () => {
    const spec = {
      name: "x",
      accel: "tcg" as const,
      cpuCores: 1,
      memoryMb: 256,
      kernel: "k",
      initramfs: "i",
      agentSocket: "a",
      qmpSocket: "q",
      consoleLog: "c",
      pidFile: "p",
    };
    const cpuOf = (args: string[]) => args[args.indexOf("-cpu") + 1];
    expect(cpuOf(buildQemuArgs(spec))).toBe(cpuModel("tcg", false));
    expect(cpuOf(buildQemuArgs({ ...spec, nested: true }))).toBe(cpuModel("tcg", true));
    expect(kernelCmdline(spec)).not.toContain("sandtree.kvm");
    expect(kernelCmdline({ ...spec, nested: true })).toContain("sandtree.kvm=on");
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

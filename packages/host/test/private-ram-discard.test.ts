// private-ram-discard.so (packages/host/jail/private-ram-discard.c), preloaded into a program
// that punches holes with glibc's fallocate (util-linux's `fallocate -p`): the file named by
// SANDTREE_PRIVATE_RAM keeps its bytes and blocks, any other file is punched as without it.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { privateRamShimFile } from "../src/paths.js";
import { buildQemuArgs } from "../src/vmm/qemu-args.js";
import { TINY_QEMU_SPEC } from "./helpers/qemu-spec.js";

const shim = privateRamShimFile();
const hasFallocate = (() => {
  try {
    execFileSync("fallocate", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();
const dir = mkdtempSync(path.join(tmpdir(), "sandtree-prd-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(!existsSync(shim) || !hasFallocate)("the private RAM discard library", () => {
  it("skips a hole punch in the named file only", () => {
    const ram = path.join(dir, "ram");
    const disk = path.join(dir, "disk");
    const data = randomBytes(256 * 1024);
    writeFileSync(ram, data);
    writeFileSync(disk, data);
    const st = statSync(ram, { bigint: true });
    const env = { ...process.env, LD_PRELOAD: shim, SANDTREE_PRIVATE_RAM: `${st.dev}:${st.ino}` };
    for (const f of [ram, disk]) execFileSync("fallocate", ["-p", "-o", "0", "-l", "65536", f], { env });
    expect(readFileSync(ram).equals(data)).toBe(true);
    const punched = readFileSync(disk);
    expect(punched.subarray(0, 65536).every((b) => b === 0)).toBe(true);
    expect(punched.subarray(65536).equals(data.subarray(65536))).toBe(true);
    // Without the variable it acts on no file.
    execFileSync("fallocate", ["-p", "-o", "0", "-l", "65536", ram], { env: { ...process.env, LD_PRELOAD: shim } });
    expect(
      readFileSync(ram)
        .subarray(0, 65536)
        .every((b) => b === 0),
    ).toBe(true);
  });
});

describe("the balloon device", () => {
  it("comes last (the other devices keep their virtio-mmio slots), without statistics polling", () => {
    const spec = TINY_QEMU_SPEC;
    expect(buildQemuArgs(spec).join(" ")).not.toContain("balloon");
    const args = buildQemuArgs({ ...spec, freePageReporting: true });
    expect(args.slice(-2)).toEqual(["-device", "virtio-balloon-device,free-page-reporting=on"]);
  });
});

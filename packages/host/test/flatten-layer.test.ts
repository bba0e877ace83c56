import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { flattenLayer } from "../src/qemu.js";

const dir = mkdtempSync(path.join(tmpdir(), "sandtree-flatten-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const qemuImg = (...args: string[]) => execFileSync("qemu-img", args, { cwd: dir, encoding: "utf8" });
const qemuIo = (file: string, cmd: string) => execFileSync("qemu-io", ["-c", cmd, file], { cwd: dir, encoding: "utf8" });

describe("flattenLayer", () => {
  it("keeps what every intermediate layer holds, over the given backing", async () => {
    qemuImg("create", "-q", "-f", "qcow2", "base.qcow2", "64M");
    qemuIo("base.qcow2", "write -P 0x11 0 64k");
    qemuImg("create", "-q", "-f", "qcow2", "-b", "base.qcow2", "-F", "qcow2", "l1.qcow2");
    qemuIo("l1.qcow2", "write -P 0x22 1M 64k");
    qemuImg("create", "-q", "-f", "qcow2", "-b", "l1.qcow2", "-F", "qcow2", "l2.qcow2");
    qemuIo("l2.qcow2", "write -P 0x33 2M 64k");
    const { sha256 } = await flattenLayer(dir, "l2.qcow2", "base.qcow2", "flat.qcow2");
    expect(sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(qemuImg("compare", "-U", "l2.qcow2", "flat.qcow2")).toMatch(/identical/);
    const chain = JSON.parse(qemuImg("info", "-U", "--backing-chain", "--output=json", "flat.qcow2")) as Array<{
      filename: string;
    }>;
    expect(chain.map((c) => path.basename(c.filename))).toEqual(["flat.qcow2", "base.qcow2"]);
    // The intermediate layer's clusters are in the flat layer itself, not read through l1.
    rmSync(path.join(dir, "l1.qcow2"));
    expect(qemuIo("flat.qcow2", "read -P 0x22 1M 64k")).not.toMatch(/verification failed/i);
  });
});

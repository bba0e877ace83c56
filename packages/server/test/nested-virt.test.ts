import { execFileSync } from "node:child_process";
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { guestArtifacts } from "@sandtree/host";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers.js";

// Nested virtualization (a sandbox with its own /dev/kvm) and the CPU a sandbox gets without it.
// Under TCG the guest CPU emulates AMD SVM; a QEMU inside the sandbox then runs a guest of its own
// with -accel kvm. One plain and one nested sandbox, shared by the cases.

let t: TestServer;
let plain: string;
let nested: string;
const work = mkdtempSync(path.join(tmpdir(), "sandtree-nested-"));

beforeAll(async () => {
  t = await startTestServer();
  const mk = async (body: Record<string, unknown>) => {
    const r = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", disk_size_gb: 1, ...body });
    expect(r.status).toBe(201);
    return r.body.id as string;
  };
  [plain, nested] = await Promise.all([mk({ memory_gb: 0.25 }), mk({ memory_gb: 1, nested_virtualization: true })]);
  await Promise.all([t.waitRunning(plain), t.waitRunning(nested)]);
}, 300_000);

afterAll(async () => {
  await t?.close();
  rmSync(work, { recursive: true, force: true });
});

const sh = async (id: string, command: string, timeout_seconds = 60) => {
  const r = await t.api("POST", `/v1/sandboxes/${id}/exec`, { command, timeout_seconds });
  expect(r.status).toBe(200);
  return r.body as { stdout: string; stderr: string; exit_code: number };
};

/** A tarball of the host's QEMU with its libraries and firmware at their own paths, a kernel and an init for the inner guest. */
function innerQemuTarball(): string {
  const root = path.join(work, "root");
  const qemu = execFileSync("sh", ["-c", "command -v qemu-system-x86_64"], { encoding: "utf8" }).trim();
  const put = (file: string) => {
    mkdirSync(path.join(root, path.dirname(file)), { recursive: true });
    copyFileSync(file, path.join(root, file));
  };
  put(qemu);
  for (const lib of execFileSync("ldd", [qemu], { encoding: "utf8" }).match(/\/\S+/g) ?? []) put(lib);
  cpSync("/usr/share/qemu", path.join(root, "usr/share/qemu"), { recursive: true, dereference: true });
  const l2 = path.join(work, "l2");
  mkdirSync(path.join(l2, "bin"), { recursive: true });
  copyFileSync("/bin/busybox", path.join(l2, "bin/busybox"));
  writeFileSync(
    path.join(l2, "init"),
    "#!/bin/busybox sh\n/bin/busybox mkdir -p /proc\n/bin/busybox mount -t proc p /proc\necho INNER-INIT $(/bin/busybox cat /proc/uptime)\n/bin/busybox poweroff -f\n",
    { mode: 0o755 },
  );
  mkdirSync(path.join(root, "nested"), { recursive: true });
  execFileSync("sh", ["-c", `cd "${l2}" && find . | cpio -o -H newc 2>/dev/null | gzip -1 > "${root}/nested/initrd.gz"`]);
  copyFileSync(guestArtifacts().kernel, path.join(root, "nested/vmlinuz"));
  const tar = path.join(work, "qemu.tar.gz");
  execFileSync("tar", ["-C", root, "-czf", tar, "."]);
  return tar;
}

describe("nested virtualization", () => {
  it("a plain sandbox's CPU hides SVM and its /dev/kvm does not work", { timeout: 120_000 }, async () => {
    const r = await sh(plain, "grep -cw svm /proc/cpuinfo; cat /dev/kvm 2>&1 | head -1; true");
    expect(r.stdout.split("\n")[0]).toBe("0");
    // The module is on the modules disk, but the CPU has nothing for it to drive.
    const load = await sh(plain, "modprobe kvm_amd 2>&1; echo rc=$?");
    expect(load.stdout).toMatch(/rc=[1-9]/);
    const got = await t.api("GET", `/v1/sandboxes/${plain}`);
    expect(got.body.nested_virtualization).toBe(false);
  });

  it("a nested sandbox has /dev/kvm and boots a guest of its own under -accel kvm", { timeout: 600_000 }, async () => {
    const got = await t.api("GET", `/v1/sandboxes/${nested}`);
    expect(got.body.nested_virtualization).toBe(true);
    const cpu = await sh(
      nested,
      "grep -cw svm /proc/cpuinfo; test -c /dev/kvm && echo kvm-node; ls /sys/module | grep -x kvm_amd",
    );
    expect(Number(cpu.stdout.split("\n")[0])).toBeGreaterThan(0);
    expect(cpu.stdout).toContain("kvm-node");
    expect(cpu.stdout).toContain("kvm_amd");
    const up = await t.api("PUT", `/v1/sandboxes/${nested}/files?path=/tmp/qemu.tar.gz`, readFileSync(innerQemuTarball()), {
      "content-type": "application/octet-stream",
    });
    expect(up.status).toBe(200);
    await sh(nested, "tar -C / -xzf /tmp/qemu.tar.gz && rm /tmp/qemu.tar.gz", 120);
    const inner = await sh(
      nested,
      "qemu-system-x86_64 -M microvm -accel kvm -cpu host -m 128 -nodefaults -no-user-config -display none " +
        "-serial stdio -kernel /nested/vmlinuz -initrd /nested/initrd.gz -append 'console=ttyS0 panic=-1 quiet' 2>&1 | tail -5",
      400,
    );
    expect(inner.stdout).toMatch(/INNER-INIT \d/);
  });

  it("children inherit it, and a memory state loads only into the CPU it was saved on", { timeout: 300_000 }, async () => {
    const ck = await t.api("POST", `/v1/sandboxes/${nested}/checkpoints`, { include_memory: true });
    expect(ck.status).toBe(201);
    const ckId = ck.body.id as string;
    const row = await t.api("GET", `/v1/checkpoints/${ckId}`);
    expect(row.body.machine).toBe("tcg+nested");
    // A memory restore keeps the checkpoint's CPU: asking for another one is refused.
    const other = await t.api("POST", "/v1/sandboxes", {
      checkpoint_id: ckId,
      restore_memory: true,
      nested_virtualization: false,
    });
    expect(other.status).toBe(400);
    expect(other.body.code).toBe("VALIDATION_FAILED");
    // A reset of a plain sandbox of the same size to it: another CPU model.
    const twin = await t.api("POST", "/v1/sandboxes", { image: "sandtree/busybox", disk_size_gb: 1, memory_gb: 1 });
    await t.waitRunning(twin.body.id);
    const reset = await t.api("POST", `/v1/sandboxes/${twin.body.id}/reset`, { checkpoint_id: ckId });
    expect(reset.status).toBe(409);
    expect(reset.body.code).toBe("MEMORY_STATE_INCOMPATIBLE");
    expect(reset.body.message).toContain("tcg+nested");
    await t.api("DELETE", `/v1/sandboxes/${twin.body.id}`);
    // A memory child resumes with KVM loaded and usable.
    const child = await t.api("POST", "/v1/sandboxes", { checkpoint_id: ckId, restore_memory: true });
    expect(child.status).toBe(201);
    expect(child.body.nested_virtualization).toBe(true);
    await t.waitRunning(child.body.id);
    const r = await sh(child.body.id, "test -c /dev/kvm && grep -cw svm /proc/cpuinfo");
    expect(Number(r.stdout.trim())).toBeGreaterThan(0);
    await t.api("DELETE", `/v1/sandboxes/${child.body.id}`);
  });

  it("a nested sandbox of several vCPUs on an emulated host is warned in its logs; one of one vCPU is not", {
    timeout: 300_000,
  }, async () => {
    const events = async (id: string) =>
      ((await t.api("GET", `/v1/sandboxes/${id}/logs`)).body.events as Array<{ message: string }>).map((e) => e.message);
    const warned = (messages: string[]) =>
      messages.some((m) => m.startsWith("warning: nested virtualization with several vCPUs"));
    const two = await t.api("POST", "/v1/sandboxes", {
      image: "sandtree/busybox",
      disk_size_gb: 1,
      memory_gb: 0.5,
      cpu_cores: 2,
      nested_virtualization: true,
    });
    expect(two.status).toBe(201);
    await t.waitRunning(two.body.id);
    const accel = (await t.api("GET", `/v1/sandboxes/${two.body.id}`)).body.accel;
    // Under KVM no SVM is emulated: nothing to warn of.
    expect(warned(await events(two.body.id))).toBe(accel === "tcg");
    expect(warned(await events(nested))).toBe(false);
    await t.api("DELETE", `/v1/sandboxes/${two.body.id}`);
  });
});

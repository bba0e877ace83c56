import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createQemuHost, detectAccel, writeRootfsLayout } from "@sandtree/host";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRegistry, type TestRegistry } from "../../host/test/helpers/registry.js";
import { loadConfig } from "../src/config.js";
import { serverJail } from "../src/default-host.js";
import { startTestServer, type TestServer } from "./helpers.js";

let registry: TestRegistry;
let t: TestServer;
let work: string;
let imageRef: string;

/** A busybox root filesystem, pushed as an OCI image to a real registry with skopeo. */
async function pushBusybox(): Promise<string> {
  const rfs = path.join(work, "rootfs");
  for (const d of ["bin", "etc", "root", "tmp", "proc", "sys", "dev"]) mkdirSync(path.join(rfs, d), { recursive: true });
  chmodSync(path.join(rfs, "tmp"), 0o1777);
  copyFileSync("/bin/busybox", path.join(rfs, "bin/busybox"));
  chmodSync(path.join(rfs, "bin/busybox"), 0o755);
  for (const applet of ["sh", "cat", "echo", "ls", "uname", "true", "id"]) symlinkSync("busybox", path.join(rfs, "bin", applet));
  writeFileSync(path.join(rfs, "etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n");
  writeFileSync(path.join(rfs, "etc/pulled-from"), "registry\n");
  const layout = path.join(work, "layout");
  await writeRootfsLayout(rfs, layout, { refName: "1.0" });
  const ref = `${registry.host}/e2e/busybox:1.0`;
  execFileSync("skopeo", ["copy", "--quiet", "--dest-tls-verify=false", `oci:${layout}:1.0`, `docker://${ref}`]);
  return ref;
}

beforeAll(async () => {
  work = mkdtempSync(path.join(tmpdir(), "sandtree-pull-"));
  registry = await startRegistry();
  imageRef = await pushBusybox();
  // This machine's QEMU host, jailed as the server's own would be, with an image store of the
  // test's: short names resolve on the default registry (Docker Hub unless set; here the test's).
  const { jail } = serverJail(loadConfig({}));
  const host = createQemuHost({
    accel: await detectAccel("auto", { jail }),
    jail,
    runRoot: path.join(work, "r"),
    logRoot: path.join(work, "logs"),
    // The server's blob store's local directory (its data dir's `layers`).
    layersDir: path.join(work, "data", "layers"),
    volumesDir: path.join(work, "data", "volumes"),
    images: { root: path.join(work, "images"), defaultRegistry: registry.host },
  });
  t = await startTestServer({ host, dataDir: path.join(work, "data") });
});
afterAll(async () => {
  await t?.close();
  await registry?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe("sandboxes from a registry image", () => {
  it("pulls once for concurrent creates and boots the pulled image", { timeout: 400_000 }, async () => {
    const created = await Promise.all(
      [0, 1, 2].map(() => t.api("POST", "/v1/sandboxes", { image: imageRef, memory_gb: 0.25, disk_size_gb: 1 })),
    );
    for (const c of created) expect(c.status, JSON.stringify(c.body)).toBe(201);
    const sbs = await Promise.all(created.map((c) => t.waitRunning(c.body.id)));
    expect(new Set(sbs.map((s) => s.image_digest)).size).toBe(1);
    expect(sbs[0].image_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    for (const sb of sbs) {
      const r = await t.api("POST", `/v1/sandboxes/${sb.id}/exec`, { command: ["cat", "/etc/pulled-from"] });
      expect(r.body.stdout).toBe("registry\n");
    }
    const images = await t.api("GET", "/v1/images");
    expect(images.body.images.filter((i: { ref: string }) => i.ref.includes("e2e/busybox"))).toHaveLength(1);
    await Promise.all(sbs.map((s) => t.api("DELETE", `/v1/sandboxes/${s.id}`)));
  });

  it("answers IMAGE_NOT_FOUND at once for a missing tag or repository", async () => {
    for (const ref of [`${registry.host}/e2e/busybox:nope`, `${registry.host}/e2e/missing:1`]) {
      const r = await t.api("POST", "/v1/sandboxes", { image: ref });
      expect(r.status, ref).toBe(404);
      expect(r.body.code).toBe("IMAGE_NOT_FOUND");
    }
  });

  it("pulls through the images endpoint", async () => {
    const r = await t.api("POST", "/v1/images/pull", { image: imageRef });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ source: "registry" });
  });
});

describe("importing a local OCI layout", () => {
  it("imports with an admin key and boots the image", { timeout: 300_000 }, async () => {
    const r = await t.api("POST", "/v1/images/import", {
      path: path.join(work, "layout"),
      name: "local/imported:1",
      layout_ref: "1.0",
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.source).toBe("local");
    const sb = await t.api("POST", "/v1/sandboxes", { image: "local/imported:1", memory_gb: 0.25, disk_size_gb: 1 });
    await t.waitRunning(sb.body.id);
    const out = await t.api("POST", `/v1/sandboxes/${sb.body.id}/exec`, { command: ["cat", "/etc/pulled-from"] });
    expect(out.body.stdout).toBe("registry\n");
    await t.api("DELETE", `/v1/sandboxes/${sb.body.id}`);
    const missing = await t.api("POST", "/v1/images/import", { path: path.join(work, "nope"), name: "local/x:1" });
    expect(missing.status).toBeGreaterThanOrEqual(400);
    expect(missing.status).toBeLessThan(500);
  });

  it("resolves a name without a registry on the default registry, as Docker does", { timeout: 300_000 }, async () => {
    const short = imageRef.slice(registry.host.length + 1);
    expect(short).toBe("e2e/busybox:1.0");
    const sb = await t.api("POST", "/v1/sandboxes", { image: short, memory_gb: 0.25, disk_size_gb: 1 });
    expect(sb.status, JSON.stringify(sb.body)).toBe(201);
    await t.waitRunning(sb.body.id);
    const out = await t.api("POST", `/v1/sandboxes/${sb.body.id}/exec`, { command: ["cat", "/etc/pulled-from"] });
    expect(out.body.stdout).toBe("registry\n");
    await t.api("DELETE", `/v1/sandboxes/${sb.body.id}`);
    const missing = await t.api("POST", "/v1/sandboxes", { image: "e2e/nosuch:1" });
    expect(missing.body.code).toBe("IMAGE_NOT_FOUND");
  });
});

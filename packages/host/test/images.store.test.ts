import { existsSync, readdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ImageStore } from "../src/images/image-store.js";
import { OciLayoutSource } from "../src/images/oci-layout.js";
import { writeOciLayout } from "../src/images/oci-layout-writer.js";
import {
  type BearerProxy,
  Ext4Reader,
  makeTree,
  pushLayout,
  startBearerProxy,
  startRegistry,
  type TestRegistry,
} from "./helpers/registry.js";

const CREDS = { username: "alice", password: "s3cret-pw" };

let scratch: string;
let registry: TestRegistry;
let authRegistry: TestRegistry;
let proxy: BearerProxy;
let layout: string;
let v1Digest: string;
let amd64Digest: string;

/** A fetch that counts requests by path, to see what the store asked the registry for. */
function countingFetch(): { fetch: typeof fetch; paths: string[] } {
  const paths: string[] = [];
  const wrapped: typeof fetch = (input, init) => {
    paths.push(new URL(input instanceof Request ? input.url : String(input)).pathname);
    return fetch(input, init);
  };
  return { fetch: wrapped, paths };
}

async function newStore(opts: ConstructorParameters<typeof ImageStore>[0] = {}): Promise<ImageStore> {
  return new ImageStore({ root: await mkdtemp(join(scratch, "store-")), defaultRegistry: null, ...opts });
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "sandtree-images-"));
  [registry, authRegistry] = await Promise.all([startRegistry(), startRegistry({ basicAuth: CREDS })]);
  proxy = await startBearerProxy(registry.host, CREDS);
  const l1 = await makeTree(join(scratch, "l1"), {
    "etc/hostname": "base",
    "etc/secret": { content: "s3cret", mode: 0o640, uid: 1234, gid: 5678 },
    "bin/tool": { content: "#!/bin/sh\necho tool\n", mode: 0o4755 },
    "opq/old1": "1",
    "gone.txt": "bye",
    "keep/a": "a",
  });
  const l2 = await makeTree(join(scratch, "l2"), { ".wh.gone.txt": "", "opq/.wh..wh..opq": "", "opq/new": "n" });
  const l3 = await makeTree(join(scratch, "l3"), { "etc/hostname": "upper", "late.txt": "late" });
  const amd = await makeTree(join(scratch, "amd"), { arch: "amd64" });
  const arm = await makeTree(join(scratch, "arm"), { arch: "arm64" });
  layout = join(scratch, "layout");
  await writeOciLayout(
    layout,
    [
      {
        layers: [{ dir: l1 }, { dir: l2, compression: "zstd" }, { dir: l3, compression: "none" }],
        config: { cmd: ["/bin/tool"] },
      },
    ],
    { refName: "v1" },
  );
  await writeOciLayout(
    layout,
    [
      { layers: [{ dir: arm }], platform: { os: "linux", architecture: "arm64", variant: "v8" } },
      { layers: [{ dir: amd }], platform: { os: "linux", architecture: "amd64" } },
    ],
    { refName: "multi" },
  );
  v1Digest = (await new OciLayoutSource(layout).resolveManifest("v1")).digest;
  amd64Digest = (await new OciLayoutSource(layout).resolveManifest("multi")).digest;
  await Promise.all([
    pushLayout(layout, "v1", `${registry.host}/fixtures/app:v1`),
    pushLayout(layout, "v1", `${registry.host}/fixtures/concurrent:v1`),
    pushLayout(layout, "multi", `${registry.host}/fixtures/multi:1`, { all: true }),
    pushLayout(layout, "v1", `${authRegistry.host}/private/app:v1`, { creds: CREDS }),
    pushLayout(layout, "multi", `${registry.host}/fixtures/docker:1`, { all: true, format: "v2s2" }),
  ]);
});

afterAll(async () => {
  await proxy?.stop();
  await Promise.all([registry?.stop(), authRegistry?.stop()]);
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe("ImageStore with a real registry", () => {
  it("pulls a multi-layer image into an ext4 qcow2 base with whiteouts applied", async () => {
    const store = await newStore();
    const img = await store.resolve(`${registry.host}/fixtures/app:v1`);
    expect(img).toMatchObject({ ref: `${registry.host}/fixtures/app:v1`, digest: v1Digest, source: "registry" });
    expect(img.config.cmd).toEqual(["/bin/tool"]);
    expect(img.virtualSizeBytes).toBeGreaterThanOrEqual(64 * 1024 * 1024);
    expect(img.basePath).toBe(join(store.root, "blobs", "sha256", v1Digest.slice(7), "base.qcow2"));
    const fs = await Ext4Reader.open(img.basePath, scratch);
    expect(await fs.label()).toBe("root");
    expect(await fs.cat("/etc/hostname")).toBe("upper");
    expect(await fs.cat("/late.txt")).toBe("late");
    expect(await fs.stat("/gone.txt")).toBeUndefined();
    expect(await fs.ls("/opq")).toEqual(["new"]);
    expect((await fs.ls("/")).filter((n) => n.startsWith(".wh."))).toEqual([]);
    expect(await fs.stat("/etc/secret")).toEqual({ type: "regular", mode: 0o640, uid: 1234, gid: 5678 });
    expect(await fs.stat("/bin/tool")).toMatchObject({ mode: 0o4755, uid: 0, gid: 0 });
    expect(await fs.stat("/")).toMatchObject({ type: "directory", mode: 0o755, uid: 0, gid: 0 });
  });

  it("serves a second resolve from the store without asking the registry", async () => {
    const counter = countingFetch();
    const store = await newStore({ fetch: counter.fetch });
    const first = await store.resolve(`${registry.host}/fixtures/app:v1`);
    const requests = counter.paths.length;
    const again = await new ImageStore({ root: store.root, fetch: counter.fetch }).resolve(`${registry.host}/fixtures/app:v1`);
    expect(again).toEqual(first);
    expect(counter.paths.length).toBe(requests);
    const byDigest = await store.resolve(`${registry.host}/fixtures/app@${v1Digest}`);
    expect(byDigest.basePath).toBe(first.basePath);
  });

  it("resolves a manifest list to its linux/amd64 image", async () => {
    const store = await newStore();
    const img = await store.resolve(`${registry.host}/fixtures/multi:1`);
    expect(img.digest).toBe(amd64Digest);
    const fs = await Ext4Reader.open(img.basePath, scratch);
    expect(await fs.cat("/arch")).toBe("amd64");
  });

  it("reads Docker v2 manifest lists and manifests", async () => {
    const store = await newStore();
    const raw = await fetch(`http://${registry.host}/v2/fixtures/docker/manifests/1`, {
      headers: { accept: "application/vnd.docker.distribution.manifest.list.v2+json" },
    });
    expect(raw.headers.get("content-type")).toBe("application/vnd.docker.distribution.manifest.list.v2+json");
    const img = await store.resolve(`${registry.host}/fixtures/docker:1`);
    const fs = await Ext4Reader.open(img.basePath, scratch);
    expect(await fs.cat("/arch")).toBe("amd64");
  });

  it("cancels a pull through its signal and leaves no partial base behind", async () => {
    // Cancel as soon as the first blob is requested: the build has started by then.
    const controller = new AbortController();
    const abortingFetch: typeof fetch = (input, init) => {
      if (String(input).includes("/blobs/")) setTimeout(() => controller.abort(new Error("cancelled by test")), 5);
      return fetch(input, init);
    };
    const store = await newStore({ fetch: abortingFetch });
    const ref = `${registry.host}/fixtures/app:v1`;
    await expect(store.resolve(ref, { signal: controller.signal })).rejects.toThrow("cancelled by test");
    await new Promise((r) => setTimeout(r, 200));
    expect(existsSync(join(store.root, "blobs", "sha256", v1Digest.slice(7)))).toBe(false);
    expect(readdirSync(join(store.root, "tmp"), { withFileTypes: true }).filter((e) => e.isDirectory())).toEqual([]);
    expect((await new ImageStore({ root: store.root }).resolve(ref)).digest).toBe(v1Digest);
  });

  it("pulls once when many resolves of a new ref run at the same time", async () => {
    const counter = countingFetch();
    const store = await newStore({ fetch: counter.fetch });
    const ref = `${registry.host}/fixtures/concurrent:v1`;
    const results = await Promise.all(Array.from({ length: 5 }, () => store.resolve(ref)));
    expect(new Set(results.map((r) => r.basePath)).size).toBe(1);
    expect(counter.paths.filter((p) => p.endsWith("/manifests/v1"))).toHaveLength(1);
    const blobGets = counter.paths.filter((p) => p.includes("/blobs/"));
    expect(blobGets).toHaveLength(new Set(blobGets).size);
  });

  it("answers IMAGE_NOT_FOUND for a missing tag, repository or unknown local name; REGISTRY_UNREACHABLE for a registry that does not answer", async () => {
    const counter = countingFetch();
    const store = await newStore({ fetch: counter.fetch });
    await expect(store.resolve(`${registry.host}/fixtures/app:nope`)).rejects.toMatchObject({ code: "IMAGE_NOT_FOUND" });
    await expect(store.resolve(`${registry.host}/no/such:1`)).rejects.toMatchObject({ code: "IMAGE_NOT_FOUND" });
    await expect(store.resolve("127.0.0.1:1/x:1")).rejects.toMatchObject({ code: "REGISTRY_UNREACHABLE" });
    expect(counter.paths.length).toBeGreaterThan(0);
    // A name without a registry is looked up in the store only: no request leaves the host.
    const asked = counter.paths.length;
    const local = { code: "IMAGE_NOT_FOUND", message: expect.stringContaining("not in the local store") };
    await expect(store.resolve("nosuchimage")).rejects.toMatchObject(local);
    await expect(store.resolve("sandtree/nosuch")).rejects.toMatchObject(local);
    // The suggested reference keeps the tag that was asked for.
    await expect(store.resolve("alpine:3.20")).rejects.toMatchObject({
      code: "IMAGE_NOT_FOUND",
      message: expect.stringContaining("e.g. localhost:5000/alpine:3.20)"),
    });
    expect(counter.paths.slice(asked)).toEqual([]);
    await expect(store.resolve("Not A Ref")).rejects.toMatchObject({ code: "VALIDATION_FAILED" });
  });

  it("authenticates with htpasswd basic auth", async () => {
    const store = await newStore();
    const ref = `${authRegistry.host}/private/app:v1`;
    await expect(store.resolve(ref)).rejects.toMatchObject({ code: "REGISTRY_UNAUTHORIZED" });
    await expect(store.resolve(ref, { credentials: { username: "alice", password: "wrong" } })).rejects.toMatchObject({
      code: "REGISTRY_UNAUTHORIZED",
    });
    const img = await store.resolve(ref, { credentials: CREDS });
    expect(img.digest).toBe(v1Digest);
  });

  it("fetches a bearer token from the realm with the credentials", async () => {
    const store = await newStore();
    const ref = `${proxy.host}/fixtures/app:v1`;
    await expect(store.resolve(ref, { credentials: { username: "alice", password: "no" } })).rejects.toMatchObject({
      code: "REGISTRY_UNAUTHORIZED",
    });
    const img = await store.resolve(ref, { credentials: CREDS });
    expect(img.digest).toBe(v1Digest);
    const last = proxy.tokenRequests.at(-1);
    expect(last?.authorization).toMatch(/^Basic /);
    expect(last?.scope).toBe("repository:fixtures/app:pull");
  });

  it("imports a local layout, registers a rootfs, lists, survives a restart and removes", async () => {
    const store = await newStore();
    const imported = await store.importLayout(layout, "sandtree/fixture", { layoutRef: "v1" });
    expect(imported).toMatchObject({ ref: "sandtree/fixture:latest", digest: v1Digest, source: "local" });
    const rootfs = await makeTree(join(scratch, "plain-rootfs"), { "bin/sh": { content: "x", mode: 0o755 }, "etc/os": "tiny" });
    const registered = await store.registerRootfs(rootfs, "sandtree/tiny:1");
    expect(registered.source).toBe("local");
    const fs = await Ext4Reader.open(registered.basePath, scratch);
    expect(await fs.cat("/etc/os")).toBe("tiny");

    const reopened = new ImageStore({ root: store.root, defaultRegistry: null });
    expect((await reopened.resolve("sandtree/fixture")).basePath).toBe(imported.basePath);
    expect((await reopened.list()).map((i) => i.ref).sort()).toEqual(["sandtree/fixture:latest", "sandtree/tiny:1"]);

    await reopened.remove("sandtree/tiny:1");
    expect(existsSync(registered.basePath)).toBe(false);
    await expect(reopened.resolve("sandtree/tiny:1")).rejects.toMatchObject({ code: "IMAGE_NOT_FOUND" });
    await expect(reopened.remove("sandtree/tiny:1")).rejects.toMatchObject({ code: "IMAGE_NOT_FOUND" });
  });
});

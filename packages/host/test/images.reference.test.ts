import { describe, expect, it } from "vitest";
import { parseReference, registryBaseUrl, remoteRepository } from "../src/images/reference.js";
import { parseWwwAuthenticate } from "../src/images/registry-auth.js";

const D = `sha256:${"a".repeat(64)}`;

describe("parseReference", () => {
  it.each([
    ["sandtree/busybox", undefined, "sandtree/busybox", "latest", undefined, "sandtree/busybox:latest"],
    ["alpine:3.20", undefined, "alpine", "3.20", undefined, "alpine:3.20"],
    ["docker.io/alpine", "docker.io", "library/alpine", "latest", undefined, "docker.io/library/alpine:latest"],
    ["index.docker.io/acme/tool:1", "docker.io", "acme/tool", "1", undefined, "docker.io/acme/tool:1"],
    ["localhost:5000/x", "localhost:5000", "x", "latest", undefined, "localhost:5000/x:latest"],
    ["localhost/x/y:tag", "localhost", "x/y", "tag", undefined, "localhost/x/y:tag"],
    ["127.0.0.1:5000/a/b_c.d-e:v1.0", "127.0.0.1:5000", "a/b_c.d-e", "v1.0", undefined, "127.0.0.1:5000/a/b_c.d-e:v1.0"],
    [`ghcr.io/o/r@${D}`, "ghcr.io", "o/r", undefined, D, `ghcr.io/o/r@${D}`],
    [`name:tag@${D}`, undefined, "name", "tag", D, `name:tag@${D}`],
  ])("%s", (input, registry, repository, tag, digest, canonical) => {
    expect(parseReference(input)).toEqual({ registry, repository, tag, digest, canonical });
  });

  it.each([
    "",
    "UPPER",
    "a//b",
    "name:",
    "name@sha256:abc",
    `name@md5:${"a".repeat(32)}`,
    "-leading",
    "has space",
    "name:tag:extra/x",
    `x:${"t".repeat(129)}`,
    "bad_host:99999999/x",
  ])("rejects %j with VALIDATION_FAILED", (input) => {
    expect(() => parseReference(input)).toThrow(expect.objectContaining({ code: "VALIDATION_FAILED" }));
  });

  it("maps Docker Hub official images under library/ only for unqualified names on docker.io", () => {
    expect(remoteRepository(parseReference("alpine"), "docker.io")).toBe("library/alpine");
    expect(remoteRepository(parseReference("acme/x"), "docker.io")).toBe("acme/x");
    expect(remoteRepository(parseReference("alpine"), "127.0.0.1:5000")).toBe("alpine");
  });

  it("uses http only for loopback or insecure registries", () => {
    expect(registryBaseUrl("127.0.0.1:5000")).toBe("http://127.0.0.1:5000");
    expect(registryBaseUrl("localhost")).toBe("http://localhost");
    expect(registryBaseUrl("ghcr.io")).toBe("https://ghcr.io");
    expect(registryBaseUrl("docker.io")).toBe("https://registry-1.docker.io");
    expect(registryBaseUrl("reg.lan:5000", true)).toBe("http://reg.lan:5000");
  });
});

describe("parseWwwAuthenticate", () => {
  it("parses a Bearer challenge", () => {
    const [c] = parseWwwAuthenticate(
      'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/alpine:pull"',
    );
    expect(c).toEqual({
      scheme: "bearer",
      params: { realm: "https://auth.docker.io/token", service: "registry.docker.io", scope: "repository:library/alpine:pull" },
    });
  });

  it("parses Basic and several challenges, with escapes", () => {
    expect(parseWwwAuthenticate('Basic realm="a \\"b\\"", Bearer realm="x",scope=y')).toEqual([
      { scheme: "basic", params: { realm: 'a "b"' } },
      { scheme: "bearer", params: { realm: "x", scope: "y" } },
    ]);
  });
});

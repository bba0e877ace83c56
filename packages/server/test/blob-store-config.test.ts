import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.js";

const blobStore = (v: string) => loadConfig({}, { SANDTREE_BLOB_STORE: v }).blobStore;

describe("blob store setting", () => {
  it("is unset by default (the data dir's layers directory)", () => {
    expect(loadConfig({}, {}).blobStore).toBeUndefined();
  });

  it("parses an S3 URL with its prefix and parameters, the option over the variable", () => {
    expect(blobStore("s3://layers-prod/team-a/eu?endpoint=https://s3.example.com&region=eu-west-1")).toEqual({
      kind: "s3",
      bucket: "layers-prod",
      prefix: "team-a/eu/",
      endpoint: "https://s3.example.com",
      region: "eu-west-1",
      forcePathStyle: true,
      verifyEtag: true,
    });
    expect(blobStore("s3://bucket1?force_path_style=false&verify_etag=0&part_size_mb=64")).toEqual({
      kind: "s3",
      bucket: "bucket1",
      prefix: "",
      forcePathStyle: false,
      verifyEtag: false,
      partSizeMb: 64,
    });
    const cfg = loadConfig({ blobStore: "s3://from-option" }, { SANDTREE_BLOB_STORE: "s3://from-env" });
    expect(cfg.blobStore).toMatchObject({ bucket: "from-option" });
  });

  it("takes an S3 store's region from AWS_REGION (then AWS_DEFAULT_REGION) when its URL names none", () => {
    const region = (url: string, env: Record<string, string>) => {
      const b = loadConfig({}, { SANDTREE_BLOB_STORE: url, ...env }).blobStore;
      return b?.kind === "s3" ? b.region : "not s3";
    };
    expect(region("s3://bkt", { AWS_REGION: "eu-north-1", AWS_DEFAULT_REGION: "us-west-2" })).toBe("eu-north-1");
    expect(region("s3://bkt", { AWS_DEFAULT_REGION: "us-west-2" })).toBe("us-west-2");
    expect(region("s3://bkt?region=auto", { AWS_REGION: "eu-north-1" })).toBe("auto");
    expect(region("s3://bkt", {})).toBeUndefined();
  });

  it("takes a directory as a file:// URL or a path", () => {
    expect(blobStore("file:///srv/sandtree/layers")).toEqual({ kind: "local", dir: "/srv/sandtree/layers" });
    expect(blobStore("/srv/layers")).toEqual({ kind: "local", dir: "/srv/layers" });
  });

  it("refuses bad URLs with a clear VALIDATION_FAILED naming the setting", () => {
    const bad: Array<[string, RegExp]> = [
      ["s3://", /bucket name/],
      ["s3://Bad_Bucket", /bucket name/],
      ["s3://bucket?endpoint=ftp://x", /endpoint must be an http/],
      ["s3://bucket?regoin=us-east-1", /unknown parameter regoin/],
      ["s3://bucket?part_size_mb=1", /at least 5/],
      ["s3://key:secret@bucket", /credentials do not belong in the URL/],
      ["s3://bucket/a b", /prefix/],
      ["gs://bucket", /unsupported blob store/],
      ["file://host/dir", /file:\/\/\/path/],
    ];
    for (const [url, why] of bad) {
      let err: unknown;
      try {
        blobStore(url);
      } catch (e) {
        err = e;
      }
      expect(err, url).toMatchObject({ code: "VALIDATION_FAILED", message: expect.stringMatching(why) });
      expect((err as Error).message).toContain("SANDTREE_BLOB_STORE");
    }
  });
});

import path from "node:path";
import { type BlobStore, LocalDirBlobStore, S3BlobStore } from "@sandtree/host";
import { z } from "zod";

/**
 * Where checkpoint layers are stored durably (`--blob-store`, SANDTREE_BLOB_STORE):
 * - a directory: a plain path or `file:///path` (unset: DATA_DIR/layers);
 * - an S3-compatible bucket: `s3://BUCKET[/PREFIX]?endpoint=URL&region=R&force_path_style=true`,
 *   with `verify_etag=false` for buckets whose ETags are not MD5s (SSE-KMS) and `part_size_mb=N`.
 *   Credentials come from the AWS SDK's default chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 *   AWS_PROFILE, ...), never from the URL.
 */
export type BlobStoreSetting =
  | { kind: "local"; dir: string }
  | {
      kind: "s3";
      bucket: string;
      prefix: string;
      endpoint?: string;
      region?: string;
      forcePathStyle: boolean;
      verifyEtag: boolean;
      partSizeMb?: number;
    };

const S3_PARAMS = ["endpoint", "region", "force_path_style", "verify_etag", "part_size_mb"] as const;
const boolParam = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");

const S3Query = z
  .object({
    endpoint: z.url({ protocol: /^https?$/, error: "endpoint must be an http:// or https:// URL" }).optional(),
    region: z
      .string()
      .regex(/^[a-z0-9-]{1,40}$/, "region must be a region name such as us-east-1 or auto")
      .optional(),
    force_path_style: boolParam.optional(),
    verify_etag: boolParam.optional(),
    part_size_mb: z.coerce.number().int().min(5, "part_size_mb is at least 5 (S3's minimum part)").max(5120).optional(),
  })
  .strict();

function parseS3(url: URL, ctx: z.RefinementCtx): BlobStoreSetting | typeof z.NEVER {
  const fail = (message: string) => {
    ctx.addIssue({ code: "custom", message });
    return z.NEVER;
  };
  const bucket = url.hostname;
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    return fail(`s3:// needs a bucket name (3-63 of a-z, 0-9, '.', '-'), got ${JSON.stringify(bucket)}`);
  }
  if (url.username || url.password || url.port) {
    return fail("credentials do not belong in the URL: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  }
  const segments = url.pathname.split("/").filter(Boolean);
  if (segments.some((s) => !/^[A-Za-z0-9._-]+$/.test(s) || s === "." || s === "..")) {
    return fail(`the key prefix ${JSON.stringify(url.pathname)} may hold only letters, digits, '.', '_', '-' and '/'`);
  }
  const query: Record<string, string> = {};
  for (const [k, v] of url.searchParams) {
    if (!(S3_PARAMS as readonly string[]).includes(k)) return fail(`unknown parameter ${k} (known: ${S3_PARAMS.join(", ")})`);
    query[k] = v;
  }
  const q = S3Query.safeParse(query);
  if (!q.success) return fail(q.error.issues[0]?.message ?? "invalid parameters");
  return {
    kind: "s3",
    bucket,
    prefix: segments.length > 0 ? `${segments.join("/")}/` : "",
    ...(q.data.endpoint ? { endpoint: q.data.endpoint } : {}),
    ...(q.data.region ? { region: q.data.region } : {}),
    // Self-hosted servers (MinIO, Ceph RGW) want the bucket in the path; AWS itself does not.
    forcePathStyle: q.data.force_path_style ?? q.data.endpoint !== undefined,
    verifyEtag: q.data.verify_etag ?? true,
    ...(q.data.part_size_mb ? { partSizeMb: q.data.part_size_mb } : {}),
  };
}

export const BlobStoreUrl = z
  .string()
  .min(1)
  .transform((v, ctx): BlobStoreSetting => {
    if (v.startsWith("s3://")) {
      let url: URL;
      try {
        url = new URL(v);
      } catch {
        ctx.addIssue({ code: "custom", message: `not a URL: ${v}` });
        return z.NEVER;
      }
      return parseS3(url, ctx);
    }
    if (v.startsWith("file://")) {
      const url = new URL(v);
      if (url.host !== "" || url.search !== "") {
        ctx.addIssue({ code: "custom", message: "file:// takes an absolute path and no host or parameters: file:///path" });
        return z.NEVER;
      }
      return { kind: "local", dir: decodeURIComponent(url.pathname) };
    }
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(v)) {
      ctx.addIssue({
        code: "custom",
        message: `unsupported blob store ${JSON.stringify(v)}: use s3://BUCKET, file:///DIR or a path`,
      });
      return z.NEVER;
    }
    return { kind: "local", dir: path.resolve(v) };
  });

/** The blob store a setting names; an S3 store keeps its local cache in `layersDir`. */
export function makeBlobStore(setting: BlobStoreSetting | undefined, layersDir: string): BlobStore {
  if (!setting) return new LocalDirBlobStore(layersDir);
  if (setting.kind === "local") return new LocalDirBlobStore(setting.dir);
  return new S3BlobStore({
    bucket: setting.bucket,
    prefix: setting.prefix,
    ...(setting.endpoint ? { endpoint: setting.endpoint } : {}),
    ...(setting.region ? { region: setting.region } : {}),
    forcePathStyle: setting.forcePathStyle,
    verifyEtag: setting.verifyEtag,
    ...(setting.partSizeMb ? { partSize: setting.partSizeMb * 1024 * 1024 } : {}),
    localDir: layersDir,
  });
}

/**
 * The URL of an S3 setting, in one canonical form (what a control plane tells its workers; it
 * holds no credentials: the URL never does).
 */
export function s3Url(s: Extract<BlobStoreSetting, { kind: "s3" }>): string {
  const q = new URLSearchParams();
  if (s.endpoint) q.set("endpoint", s.endpoint);
  if (s.region) q.set("region", s.region);
  q.set("force_path_style", String(s.forcePathStyle));
  q.set("verify_etag", String(s.verifyEtag));
  if (s.partSizeMb) q.set("part_size_mb", String(s.partSizeMb));
  return `s3://${s.bucket}/${s.prefix}?${q.toString()}`;
}

/** Whether two settings name the same store (the same bucket, prefix and endpoint, or the same directory). */
export function sameBlobStore(a: BlobStoreSetting, b: BlobStoreSetting): boolean {
  if (a.kind === "local") return b.kind === "local" && a.dir === b.dir;
  if (b.kind === "local") return false;
  return a.bucket === b.bucket && a.prefix === b.prefix && (a.endpoint ?? "") === (b.endpoint ?? "");
}

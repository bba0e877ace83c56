import type * as ClientS3 from "@aws-sdk/client-s3";
import type * as LibStorage from "@aws-sdk/lib-storage";

export interface S3Sdk {
  s3: typeof ClientS3;
  storage: typeof LibStorage;
}

let loading: Promise<S3Sdk> | null = null;

/** The AWS SDK, imported on first use: some 200 ms of module loading only S3 deployments pay. */
export function loadS3Sdk(): Promise<S3Sdk> {
  loading ??= Promise.all([import("@aws-sdk/client-s3"), import("@aws-sdk/lib-storage")]).then(([s3, storage]) => ({
    s3,
    storage,
  }));
  return loading;
}

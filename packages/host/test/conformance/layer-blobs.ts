// The blob store a conformance subject's layers port works on: a real S3-protocol server (s3rver)
// whose local cache is the subject's layers directory, so a layer missing there is downloaded.
import { S3BlobStore } from "../../src/index.js";
import { S3RVER_CREDENTIALS, startS3 } from "../helpers/s3-server.js";

export async function layerBlobs(dir: string): Promise<{ blobs: S3BlobStore; close: () => Promise<void> }> {
  const s3 = await startS3();
  const blobs = new S3BlobStore({
    bucket: s3.bucket,
    prefix: "conformance/",
    endpoint: s3.endpoint,
    forcePathStyle: true,
    localDir: dir,
    clientConfig: { credentials: S3RVER_CREDENTIALS },
  });
  return {
    blobs,
    close: async () => {
      blobs.close();
      await s3.close();
    },
  };
}

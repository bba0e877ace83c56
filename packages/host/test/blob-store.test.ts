import { appendFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { LocalDirBlobStore } from "../src/index.js";
import { blobStoreConformance } from "./blob-store-conformance.js";

blobStoreConformance("local directory", async () => {
  const root = mkdtempSync(path.join(tmpdir(), "sandtree-blobs-"));
  const store = new LocalDirBlobStore(path.join(root, "layers"));
  return {
    store,
    scratch: path.join(root, "layers"),
    corrupt: async (key) => appendFileSync(path.join(store.localDir, key), "x"),
  };
});

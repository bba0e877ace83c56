#!/usr/bin/env node
// The blob store's transfers: put (upload + checks) and materialize (download + hash + fsync +
// rename) of one layer-sized file, for the local directory store and for the S3 store against
// s3rver on loopback (a test server writing plain files: an upper bound of the store's own
// overhead, not a figure for a real object store).
// Measures, each the median of --runs:
//   local.put_ms / local.materialize_ms:     LocalDirBlobStore (rename; hash on first materialize)
//   s3.put_ms / s3.materialize_cold_ms:      S3BlobStore, materialize with no local copy (download)
//   s3.materialize_warm_ms:                  S3BlobStore, cached copy with a valid marker (no hash)
//   floor.copy_ms / floor.sha256_ms:         `cp` and `sha256sum` of the same file, same run
// Usage: node bench/blob-store.mjs [--mib 64] [--runs 3]. Prints one JSON document; removes what it made.
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { LocalDirBlobStore, S3BlobStore } from "@sandtree/host";
import S3rver from "s3rver";
import { median, time } from "./lib/stats.mjs";

const { values } = parseArgs({ options: { mib: { type: "string", default: "64" }, runs: { type: "string", default: "3" } } });
const MIB = Number(values.mib);
const RUNS = Number(values.runs);
const root = mkdtempSync(path.join(tmpdir(), "sandtree-bench-blobs-"));

const data = randomBytes(MIB * 1024 * 1024);
const sha256 = createHash("sha256").update(data).digest("hex");
const meta = { sha256, size: data.length };
const source = path.join(root, "source");
writeFileSync(source, data);
const s3dir = path.join(root, "s3");
mkdirSync(s3dir);
const server = new S3rver({
  address: "127.0.0.1",
  port: 0,
  silent: true,
  directory: s3dir,
  configureBuckets: [{ name: "bench" }],
});
const { port } = await server.run();
const out = { mib: MIB, runs: RUNS, local: {}, s3: {}, floor: {} };
try {
  const r = { lp: [], lm: [], sp: [], sc: [], sw: [], cp: [], sh: [] };
  for (let i = 0; i < RUNS; i++) {
    const local = new LocalDirBlobStore(path.join(root, `local-${i}`));
    const stage = () => {
      const f = path.join(root, `local-${i}`, `stage-${i}`);
      copyFileSync(source, f);
      return f;
    };
    let f = stage();
    r.lp.push(await time(() => local.put(`ck-${i}`, f, meta)));
    const fresh = new LocalDirBlobStore(local.localDir);
    r.lm.push(await time(() => fresh.materialize(`ck-${i}`, sha256)));
    const s3 = new S3BlobStore({
      bucket: "bench",
      prefix: `run-${i}/`,
      endpoint: `http://127.0.0.1:${port}`,
      forcePathStyle: true,
      localDir: path.join(root, `cache-${i}`),
      clientConfig: { credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" } },
    });
    f = path.join(s3.localDir, `stage-${i}`);
    copyFileSync(source, f);
    r.sp.push(await time(() => s3.put(`ck-${i}`, f, meta)));
    rmSync(path.join(s3.localDir, `ck-${i}`));
    r.sc.push(await time(() => s3.materialize(`ck-${i}`, sha256)));
    r.sw.push(await time(() => s3.materialize(`ck-${i}`, sha256)));
    s3.close();
    r.cp.push(await time(async () => execFileSync("cp", [source, path.join(root, `copy-${i}`)])));
    r.sh.push(await time(async () => execFileSync("sha256sum", [source])));
  }
  out.local = { put_ms: median(r.lp), materialize_ms: median(r.lm) };
  out.s3 = { put_ms: median(r.sp), materialize_cold_ms: median(r.sc), materialize_warm_ms: median(r.sw) };
  out.floor = { copy_ms: median(r.cp), sha256_ms: median(r.sh) };
} finally {
  await server.close();
  rmSync(root, { recursive: true, force: true });
}
process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);

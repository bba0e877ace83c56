#!/usr/bin/env node
// One sync of a mounted volume (docs/fleet.md, "Volumes on workers"): its part of the recovery
// bound is "one sync's duration". A volume image of --image-mib holding --data-mib of files (a few
// large, many small) is packed the way a worker packs a mounted volume (packSnapshot: fsfreeze,
// copy of the image, mount, tar, put into a local-directory blob store), each run timed; beside it,
// the floor measured in the same run: `cp --reflink=auto --sparse=never` of the image and `tar`
// of the same tree, the host's own commands with no sandtree code. tree_pack_ms is the pack of an
// idle volume (no snapshot: tar, sha256, put), to split the snapshot's share from the pack's. The upload to a real bucket
// comes on top (bench/blob-store.mjs measures the store). Needs root and loop devices.
// Usage: node bench/volume-sync.mjs [--image-mib 512] [--data-mib 128] [--runs 5]. Prints one JSON document.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { LocalDirBlobStore, VolumeImages } from "@sandtree/host";
import { packVolume } from "../packages/server/dist/services/volumes/volume-archive.js";
import { packSnapshot } from "../packages/server/dist/services/volumes/volume-sync-pack.js";
import { median, time } from "./lib/stats.mjs";

const { values } = parseArgs({
  options: {
    "image-mib": { type: "string", default: "512" },
    "data-mib": { type: "string", default: "128" },
    runs: { type: "string", default: "5" },
  },
});
const IMAGE_MIB = Number(values["image-mib"]);
const DATA_MIB = Number(values["data-mib"]);
const RUNS = Number(values.runs);
const root = mkdtempSync(path.join(tmpdir(), "sandtree-bench-vsync-"));

const images = new VolumeImages({ dataDir: root, volumeBound: "image", volumeImageMiB: IMAGE_MIB });
const dir = path.join(root, "volumes", "vol-bench", "data");
const blobs = new LocalDirBlobStore(path.join(root, "blobs"));
try {
  await images.create(dir, 1);
  // Half the bytes in 4 large files, half in 4 KiB files.
  const big = Math.floor((DATA_MIB / 2) * 1024 * 1024);
  for (let i = 0; i < 4; i++) writeFileSync(path.join(dir, `big-${i}`), randomBytes(Math.floor(big / 4)));
  mkdirSync(path.join(dir, "small"));
  const smallCount = Math.floor(big / 4096);
  for (let i = 0; i < smallCount; i++) writeFileSync(path.join(dir, "small", `f-${i}`), randomBytes(4096));
  execFileSync("sync");

  const sync = [];
  const packOnly = [];
  const floorCopy = [];
  const floorTar = [];
  let archive = 0;
  for (let r = 0; r < RUNS; r++) {
    sync.push(
      await time(async () => {
        const packed = await packSnapshot(images, blobs, dir, 1, `bench-${r}.tar`);
        archive = packed.size;
        await blobs.delete(packed.key);
      }),
    );
    packOnly.push(
      await time(async () => {
        const packed = await packVolume(blobs, dir, `bench-tree-${r}.tar`);
        await blobs.delete(packed.key);
      }),
    );
    const copy = path.join(root, "floor-image");
    floorCopy.push(
      await time(async () => execFileSync("cp", ["--reflink=auto", "--sparse=never", "--", VolumeImages.imageOf(dir), copy])),
    );
    rmSync(copy, { force: true });
    const tarFile = path.join(root, "floor.tar");
    floorTar.push(
      await time(async () =>
        execFileSync("tar", ["--create", "--file", tarFile, "--numeric-owner", "--sparse", "--directory", dir, "."]),
      ),
    );
    rmSync(tarFile, { force: true });
  }
  console.log(
    JSON.stringify(
      {
        image_mib: IMAGE_MIB,
        data_mib: DATA_MIB,
        small_files: smallCount,
        runs: RUNS,
        archive_bytes: archive,
        sync_ms: median(sync),
        tree_pack_ms: median(packOnly),
        floor: { image_copy_ms: median(floorCopy), tar_ms: median(floorTar), sum_ms: median(floorCopy) + median(floorTar) },
        load_avg_1m: +loadavg()[0].toFixed(2),
      },
      null,
      2,
    ),
  );
} finally {
  await images.unmountAll().catch(() => {});
  rmSync(root, { recursive: true, force: true });
}

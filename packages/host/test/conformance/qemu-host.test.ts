// The conformance suite against this machine's QEMU microVMs (sandtree/debian; three short VMs,
// two at a time). Without the guest's artifacts the suite fails and says why.
import { mkdtempSync, rmSync } from "node:fs";
import path from "node:path";
import { createQemuHost, VolumeImages } from "../../src/index.js";
import { hostVolumesConformance, volumesOfHost } from "./host-volumes-conformance.js";
import { layerBlobs } from "./layer-blobs.js";
import { qemuConformance } from "./qemu-subject.js";

qemuConformance("qemu", "stconf", async (host) => ({ host, close: async () => {} }));

/** A QEMU host for its volumes only (no machine starts): its directories in `dir`. */
function qemuHostIn(dir: string, volumeImages?: VolumeImages) {
  const layersDir = path.join(dir, "layers");
  return createQemuHost({
    runRoot: path.join(dir, "r"),
    logRoot: path.join(dir, "logs"),
    layersDir,
    volumesDir: path.join(dir, "volumes"),
    ...(volumeImages ? { volumeImages } : {}),
  });
}

volumesOfHost("qemu", (dir) => qemuHostIn(dir));

// As the server runs it as root: each volume its own loop-mounted ext4 image (16 MiB here), so
// creates, snapshots (the image copied while frozen) and archives go through the images.
hostVolumesConformance("qemu, volumes bounded by their images", async () => {
  const dir = mkdtempSync("/tmp/stvolconf-");
  const images = new VolumeImages({ volumesDir: path.join(dir, "volumes"), volumeBound: "image", volumeImageMiB: 16 });
  const store = await layerBlobs(path.join(dir, "layers"));
  return {
    volumes: qemuHostIn(dir, images).volumes,
    blobs: store.blobs,
    close: async () => {
      await images.unmountAll();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

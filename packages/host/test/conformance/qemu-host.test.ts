// The conformance suite against this machine's QEMU microVMs (sandtree/debian; three short VMs,
// two at a time). Without the guest's artifacts the suite fails and says why.
import { mkdtempSync, rmSync } from "node:fs";
import path from "node:path";
import { VolumeImages } from "../../src/index.js";
import { hostVolumesConformance, volumesOfHost } from "./host-volumes-conformance.js";
import { layerBlobs } from "./layer-blobs.js";
import { qemuConformance, qemuHostIn } from "./qemu-subject.js";

qemuConformance("qemu", "stconf", async (host) => ({ host, close: async () => {} }));

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

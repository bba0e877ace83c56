// Small CLI over the host image store for the setup scripts:
//   has REF                               exit 0 when the store holds REF
//   register DIR REF [CONFIG_JSON]        a root filesystem directory as the image REF
//   oci-layout DIR LAYOUT TAG [CONFIG]    a one-layer OCI layout of DIR (for skopeo to convert)
// CONFIG_JSON holds image runtime settings: {"cmd": [...], "entrypoint": [...], "env": [...], ...}.
import { ImageStore, writeOciLayout } from "@sandtree/host";
import { z } from "zod";

const Config = z
  .object({
    cmd: z.array(z.string()).optional(),
    entrypoint: z.array(z.string()).optional(),
    env: z.array(z.string()).optional(),
    workingDir: z.string().optional(),
    user: z.string().optional(),
    labels: z.record(z.string(), z.string()).optional(),
  })
  .strict();
const config = (text) => Config.parse(JSON.parse(text ?? "{}"));

const [cmd, ...args] = process.argv.slice(2);
const store = new ImageStore();
if (cmd === "has") {
  // Local names never reach a registry, so this only looks in the store.
  process.exit(
    await store.check(args[0]).then(
      () => 0,
      () => 1,
    ),
  );
} else if (cmd === "register") {
  const [dir, ref, cfg] = args;
  const img = await store.registerRootfs(dir, ref, { config: config(cfg) });
  console.log(`${img.ref} ${img.digest}`);
} else if (cmd === "oci-layout") {
  const [dir, layout, tag, cfg] = args;
  await writeOciLayout(layout, [{ layers: [{ dir, compression: "gzip" }], config: config(cfg) }], { refName: tag });
} else {
  console.error("usage: image-tool.mjs has REF | register DIR REF [CONFIG_JSON] | oci-layout DIR LAYOUT TAG [CONFIG_JSON]");
  process.exit(2);
}

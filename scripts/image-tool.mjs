// Small CLI over the host image store for the setup scripts: `has REF`, `register DIR REF`.
import { ImageStore } from "@sandtree/host";

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
  const [dir, ref] = args;
  const img = await store.registerRootfs(dir, ref);
  console.log(`${img.ref} ${img.digest}`);
} else {
  console.error("usage: image-tool.mjs has REF | register DIR REF");
  process.exit(2);
}

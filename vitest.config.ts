import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "scripts/test/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 300_000,
    // VM tests share 2 cores under TCG: run files one after another.
    fileParallelism: false,
    pool: "forks",
    // Each volume is a preallocated image of its size_gb: the suite's are small, so a run
    // reserves little of the host's disk (docs/volumes.md, "Size bound").
    env: { SANDTREE_VOLUME_IMAGE_MIB: "256" },
  },
});

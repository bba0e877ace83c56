import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "scripts/test/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 300_000,
    // VM tests share 2 cores under TCG: run files one after another.
    fileParallelism: false,
    pool: "forks",
  },
});

#!/usr/bin/env bash
# Runs lint, type checks and the whole test suite (real QEMU, real registry), then prints
# one summary line `N passed, N failed`. Needs `bash scripts/setup.sh` first.
set -uo pipefail
cd "$(dirname "$0")/.."
results=$(mktemp -d)
failed_steps=0
echo "== lint (biome)"; npx biome check . || failed_steps=$((failed_steps + 1))
echo "== types (tsc -b)"; npx tsc -b || failed_steps=$((failed_steps + 1))
# Many test servers run at once in this network namespace: they give sandboxes no network
# unless a test asks (the network tests run theirs in namespaces they create).
export SANDTREE_NETWORK="${SANDTREE_NETWORK:-off}"
echo "== tests (vitest)"
npx vitest run --reporter=default --reporter=json --outputFile="$results/vitest.json" "$@"
node -e '
  const fs = require("fs");
  let r = { numPassedTests: 0, numFailedTests: 0 };
  try { r = JSON.parse(fs.readFileSync(process.argv[1], "utf8")); } catch { r.numFailedTests = 1; }
  const failed = r.numFailedTests + Number(process.argv[2]);
  console.log(`${r.numPassedTests} passed, ${failed} failed`);
  process.exit(failed > 0 ? 1 : 0);
' "$results/vitest.json" "$failed_steps"

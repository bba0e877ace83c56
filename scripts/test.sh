#!/usr/bin/env bash
# Runs lint, type checks (sources and tests) and the whole test suite (real QEMU, real registry),
# then prints one summary line `N passed, N failed, N skipped` last and exits non-zero on any
# failure (scripts/run-vitest.mjs says what counts). Needs `bash scripts/setup.sh` first.
# Arguments go to vitest (e.g. a file filter); without any, the Python tests run too.
set -uo pipefail
cd "$(dirname "$0")/.."
failed_steps=0
echo "== lint (biome)"; npx biome check . || failed_steps=$((failed_steps + 1))
echo "== types (tsc -b)"; { bash scripts/gen-proto.sh && npx tsc -b; } || failed_steps=$((failed_steps + 1))
echo "== types of the tests (tsc -p tsconfig.test.json)"
if [ -f tsconfig.test.json ]; then npx tsc -p tsconfig.test.json || failed_steps=$((failed_steps + 1)); fi
# Many test servers run at once in this network namespace: they give sandboxes no network
# unless a test asks (the network tests run theirs in namespaces they create).
export SANDTREE_NETWORK="${SANDTREE_NETWORK:-off}"
# The whole suite (no arguments) includes the Python SDK's pytest suite, counted in the same line.
python=()
if [ $# -eq 0 ] && [ -d clients/python/tests ]; then python=(--python clients/python/tests); fi
echo "== tests (vitest)"
exec node scripts/run-vitest.mjs --failed-steps "$failed_steps" "${python[@]}" "$@"

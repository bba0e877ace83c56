#!/usr/bin/env bash
# Sets up everything sandtree needs on a Debian/Ubuntu machine. Idempotent; the kernel, guest
# and images are cached outside the clone (SANDTREE_CACHE_DIR, default ~/.cache/sandtree), so
# a second run takes seconds.
source "$(dirname "$0")/lib/common.sh"
cd "$(dirname "$0")/.."
bash scripts/setup-packages.sh
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "installing npm packages"; npm ci --no-audit --no-fund >/dev/null
fi
log "building TypeScript"; npm run --silent build
# `sandtree` on PATH (npm links a workspace's bin only when its dist existed at install time).
if ! command -v sandtree >/dev/null || [ "$(readlink -f "$(command -v sandtree)")" != "$PWD/packages/cli/dist/main.js" ]; then
  log "linking the sandtree command"; npm link -w @sandtree/cli --no-audit --no-fund >/dev/null
fi
# The Python client's synchronous parts are generated from its async ones, not checked in.
log "generating the Python client's synchronous parts"; python3 clients/python/scripts/unasync.py
bash scripts/setup-kernel.sh
bash scripts/build-guest.sh
bash scripts/build-jailer.sh
bash scripts/build-images.sh
bash scripts/setup-compat-venv.sh
log "setup complete (cache: $SANDTREE_CACHE_DIR)"

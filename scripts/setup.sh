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
bash scripts/setup-kernel.sh
bash scripts/build-guest.sh
bash scripts/build-images.sh
log "setup complete (cache: $SANDTREE_CACHE_DIR)"

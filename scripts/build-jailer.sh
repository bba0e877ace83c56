#!/usr/bin/env bash
# Builds the jail's launcher into $SANDTREE_CACHE_DIR/jail/sandtree-jail: one static program
# (packages/host/jail/sandtree-jail.c) that builds a QEMU's own root, drops its privileges and
# execs it (docs/security.md). Static: the nested KVM bundle (scripts/kvm/bundle.mjs) carries it
# as it is. Idempotent: rebuilds only when its source or this script changed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib/common.sh"
src="$(dirname "$here")/packages/host/jail/sandtree-jail.c"
out="$SANDTREE_CACHE_DIR/jail"

# Content only (no paths): two clones of the same sources share one build.
stamp_now="$( { sha256sum <"$0"; sha256sum <"$src"; } | sha256sum | cut -d' ' -f1)"
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp_now" ] && [ -x "$out/sandtree-jail" ]; then
  log "jailer up to date ($out)"; exit 0
fi
mkdir -p "$out"
gcc -static -O2 -Wall -Wextra -Werror -o "$out/sandtree-jail.tmp" "$src"
chmod 0755 "$out/sandtree-jail.tmp"
mv -f "$out/sandtree-jail.tmp" "$out/sandtree-jail"
echo "$stamp_now" > "$out/stamp"
log "jailer built: $out/sandtree-jail"

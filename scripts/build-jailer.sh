#!/usr/bin/env bash
# Builds the jail's launcher into $SANDTREE_CACHE_DIR/jail/sandtree-jail: one static program
# (packages/host/jail/sandtree-jail.c) that builds a QEMU's own root, drops its privileges and
# execs it (docs/security.md). Static: the nested KVM bundle (scripts/kvm/bundle.mjs) carries it
# as it is. Beside it, private-ram-discard.so (packages/host/jail/private-ram-discard.c): preloaded
# into a copy-on-write clone's QEMU so free page reporting never punches holes in the template's
# RAM file (QEMU 7.2; vmm/free-page-reporting.ts). Idempotent: rebuilds only when a source or this
# script changed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib/common.sh"
src="$(dirname "$here")/packages/host/jail/sandtree-jail.c"
shim="$(dirname "$here")/packages/host/jail/private-ram-discard.c"
out="$SANDTREE_CACHE_DIR/jail"

# Content only (no paths): two clones of the same sources share one build.
stamp_now="$( { sha256sum <"$0"; sha256sum <"$src"; sha256sum <"$shim"; } | sha256sum | cut -d' ' -f1)"
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp_now" ] && [ -x "$out/sandtree-jail" ] \
   && [ -f "$out/private-ram-discard.so" ]; then
  log "jailer up to date ($out)"; exit 0
fi
mkdir -p "$out"
gcc -static -O2 -Wall -Wextra -Werror -o "$out/sandtree-jail.tmp" "$src"
chmod 0755 "$out/sandtree-jail.tmp"
mv -f "$out/sandtree-jail.tmp" "$out/sandtree-jail"
gcc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$out/private-ram-discard.so.tmp" "$shim"
chmod 0644 "$out/private-ram-discard.so.tmp"
mv -f "$out/private-ram-discard.so.tmp" "$out/private-ram-discard.so"
echo "$stamp_now" > "$out/stamp"
log "jailer built: $out/sandtree-jail"

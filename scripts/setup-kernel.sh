#!/usr/bin/env bash
# Downloads the Debian cloud kernel package and extracts vmlinuz and modules into the cache,
# without installing anything into the host. Idempotent.
source "$(dirname "$0")/lib/common.sh"
dest="$SANDTREE_CACHE_DIR/kernel"
if [ -f "$dest/vmlinuz" ] && [ -f "$dest/release" ]; then
  log "kernel $(cat "$dest/release") already present"; exit 0
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
pkg=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$pkg" ] || { echo "cannot resolve linux-image-cloud-amd64" >&2; exit 1; }
log "downloading $pkg"
chmod 777 "$work"
apt-get download "$pkg" >/dev/null 2>&1 || apt-get download "$pkg"
dpkg-deb -x ./*.deb x
release=$(ls x/lib/modules | head -1)
rm -rf "$dest.tmp"; mkdir -p "$dest.tmp"
cp x/boot/vmlinuz-"$release" "$dest.tmp/vmlinuz"
mkdir -p "$dest.tmp/modules"
cp -a x/lib/modules/"$release" "$dest.tmp/modules/"
echo "$release" > "$dest.tmp/release"
rm -rf "$dest"; mv "$dest.tmp" "$dest"
log "kernel $release in $dest"

#!/usr/bin/env bash
# Builds the guest agent and the shared initramfs into $SANDTREE_CACHE_DIR/guest:
#   sandtree-agent        static PID-1 agent (packages/guest)
#   initramfs.cpio.gz     /init (the agent), /lib/modules/*.ko, /etc/modules.order
#   modules.img           every module of the kernel with depmod's indexes and a static busybox
#                         as bin/modprobe (ext4, no journal, attached read-only to every VM and
#                         mounted by init at /lib/modules/$release; /proc/sys/kernel/modprobe
#                         points at its bin/modprobe)
# Idempotent: rebuilds only when the agent sources, this script or the kernel changed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib/common.sh"
root="$(dirname "$here")"
guest="$root/packages/guest"
kdir="$SANDTREE_CACHE_DIR/kernel"
out="$SANDTREE_CACHE_DIR/guest"
# Drivers the VM needs (virtio_balloon: free page reporting, vmm/free-page-reporting.ts); their
# dependencies are added from each module's depends= line.
WANT=(virtio_ring virtio virtio_mmio virtio_blk virtio_console virtio_net virtio_balloon)

[ -f "$kdir/release" ] || "$here/setup-kernel.sh"
release="$(cat "$kdir/release")"
moddir="$kdir/modules/$release"

# Content only (no paths): two clones of the same sources share one guest build.
stamp_now="$( { cat "$kdir/release"; for f in "$0" "$guest/Makefile" "$guest"/src/*; do sha256sum <"$f"; done; } | sha256sum | cut -d' ' -f1)"
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp_now" ] \
   && [ -f "$out/initramfs.cpio.gz" ] && [ -x "$out/sandtree-agent" ] && [ -f "$out/modules.img" ]; then
  log "guest up to date ($out)"; exit 0
fi

work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
make -s -C "$guest" OUT="$work/bin" >&2

modpath() { find "$moddir/kernel" -name "$1.ko" -o -name "$1.ko.xz" -o -name "$1.ko.zst" | head -1; }
modcat() {
  case "$1" in *.ko.xz) xz -dc "$1" ;; *.ko.zst) zstd -qdc "$1" ;; *) cat "$1" ;; esac
}
moddeps() { modcat "$(modpath "$1")" | strings | sed -n 's/^depends=//p' | tr ',' ' '; }
# Depth-first: every module after its dependencies.
order=()
visit() {
  local m="$1" d
  for d in "${order[@]:-}"; do [ "$d" = "$m" ] && return 0; done
  [ -n "$(modpath "$m")" ] || { echo "module $m not found in $moddir" >&2; exit 1; }
  for d in $(moddeps "$m"); do visit "$d"; done
  order+=("$m")
}
mkdir -p "$work/root"/{dev,proc,sys,newroot,run,etc,lib/modules}
for m in "${WANT[@]}"; do visit "$m"; done
: > "$work/root/etc/modules.order"
for m in "${order[@]}"; do
  # Stored uncompressed: plain finit_module needs no in-kernel decompressor.
  modcat "$(modpath "$m")" > "$work/root/lib/modules/$m.ko"
  echo "$m.ko" >> "$work/root/etc/modules.order"
done
install -m 0755 "$work/bin/sandtree-agent" "$work/root/init"

# The modules disk: the kernel's modules tree as /lib/modules/$release would hold it.
mbase="$work/mods"; mkdir -p "$mbase/lib/modules"
cp -a "$moddir" "$mbase/lib/modules/$release"
depmod -b "$mbase" "$release"
mkdir -p "$mbase/lib/modules/$release/bin"
install -m 0755 "$(command -v busybox)" "$mbase/lib/modules/$release/bin/modprobe"
mkb=$(( $(du -sk "$mbase/lib/modules/$release" | cut -f1) * 5 / 4 + 8192 ))
mke2fs -q -t ext4 -O ^has_journal -L sandtree-mods -E root_owner=0:0 -d "$mbase/lib/modules/$release" \
  "$work/modules.img" "${mkb}k"

(cd "$work/root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) \
  | gzip -9n > "$work/initramfs.cpio.gz"
mkdir -p "$out"
install -m 0755 "$work/bin/sandtree-agent" "$out/sandtree-agent.tmp"
mv -f "$out/sandtree-agent.tmp" "$out/sandtree-agent"
mv -f "$work/initramfs.cpio.gz" "$out/initramfs.cpio.gz"
mv -f "$work/modules.img" "$out/modules.img"
echo "$stamp_now" > "$out/stamp"
log "guest built: $out (modules: ${order[*]})"

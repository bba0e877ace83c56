#!/usr/bin/env bash
# Builds the local images into the image store: sandtree/busybox (tiny, for tests),
# sandtree/debian (bookworm minbase + python3, via debootstrap) and sandtree/desktop
# (build-desktop-image.sh). Skips images already built.
source "$(dirname "$0")/lib/common.sh"
root="$(cd "$(dirname "$0")/.." && pwd)"
tool=(node "$root/scripts/image-tool.mjs")
work="$SANDTREE_CACHE_DIR/work"; mkdir -p "$work"

if ! "${tool[@]}" has sandtree/busybox; then
  log "building sandtree/busybox"
  rfs="$work/busybox-rootfs"; rm -rf "$rfs"; mkdir -p "$rfs"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,home,var/tmp,proc,sys,dev,run}
  cp /bin/busybox "$rfs/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$rfs/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\nuser:x:1000:1000:user:/home/user:/bin/sh\n' > "$rfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\nuser:x:1000:\n' > "$rfs/etc/group"
  mkdir -p "$rfs/home/user"; chown 1000:1000 "$rfs/home/user"
  chmod 1777 "$rfs/tmp" "$rfs/var/tmp"
  echo sandbox > "$rfs/etc/hostname"
  "${tool[@]}" register "$rfs" sandtree/busybox
  rm -rf "$rfs"
fi

if [ "${SANDTREE_SKIP_DEBIAN:-0}" != 1 ] && ! "${tool[@]}" has sandtree/debian; then
  log "building sandtree/debian with debootstrap (about a minute)"
  rfs="$work/debian-rootfs"; rm -rf "$rfs"
  debootstrap --variant=minbase --include=python3 bookworm "$rfs" "$(apt_mirror)" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$rfs"/var/cache/apt/archives/*.deb "$rfs"/var/lib/apt/lists/*
  echo sandbox > "$rfs/etc/hostname"
  "${tool[@]}" register "$rfs" sandtree/debian
  rm -rf "$rfs"
fi
if [ "${SANDTREE_SKIP_DESKTOP:-0}" != 1 ]; then bash "$root/scripts/build-desktop-image.sh"; fi
log "images ready"

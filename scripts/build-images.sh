#!/usr/bin/env bash
# Builds the local images into the image store: sandtree/busybox (tiny, for tests),
# sandtree/debian (bookworm minbase + python3) and sandtree/docker (Debian's Docker engine, for
# containers inside a sandbox), plus fixtures/hello-docker.tar, a docker-archive of a busybox
# image that tests `docker load` inside a sandbox (no registry, no Docker engine on the host),
# and sandtree/desktop (build-desktop-image.sh, which keys its own debootstrap).
# Each is rebuilt when it is missing or its recipe changed: a recipe's key hashes its function
# below and the files it copies, and is kept beside the store (images/recipes/).
source "$(dirname "$0")/lib/common.sh"
root="$(cd "$(dirname "$0")/.." && pwd)"
tool=(node "$root/scripts/image-tool.mjs")
files="$root/scripts/images"
work="$SANDTREE_CACHE_DIR/work"; mkdir -p "$work"
stamps="$SANDTREE_CACHE_DIR/images/recipes"; mkdir -p "$stamps"

# The key of a recipe: the text of its functions and the contents of the files it copies.
recipe_key() { for part; do if [ -f "$part" ]; then cat "$part"; else declare -f "$part"; fi; done | sha256sum | cut -c1-16; }
stamp_of() { printf '%s/%s' "$stamps" "${1//\//_}"; }
built_from() { [ "$(cat "$(stamp_of "$1")" 2>/dev/null)" = "$2" ]; }
# An image built before recipes were keyed is adopted once instead of rebuilt (same recipe).
adopt_unkeyed() { [ -e "$(stamp_of "$1")" ] || ! "${tool[@]}" has "$1" || echo "$2" >"$(stamp_of "$1")"; }

busybox_rootfs() {
  local rfs=$1
  mkdir -p "$rfs"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,home/user,var/tmp,proc,sys,dev,run}
  cp /bin/busybox "$rfs/bin/busybox"
  # Every applet in /bin (as before) and at the path busybox gives it (/usr/bin/env for #! lines).
  local p
  for p in $(/bin/busybox --list-full); do
    [ "$p" = bin/busybox ] && continue
    ln -sf busybox "$rfs/bin/${p##*/}"
    [ -e "$rfs/$p" ] || [ -L "$rfs/$p" ] || ln -s /bin/busybox "$rfs/$p"
  done
  # Debian's busybox 1.35 is built without the nohup applet.
  rm -f "$rfs/bin/nohup" "$rfs/usr/bin/nohup"
  install -m 0755 "$files/nohup" "$rfs/usr/bin/nohup"
  ln -s ../usr/bin/nohup "$rfs/bin/nohup"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\nuser:x:1000:1000:user:/home/user:/bin/sh\n' > "$rfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\nuser:x:1000:\n' > "$rfs/etc/group"
  chown 1000:1000 "$rfs/home/user"
  chmod 1777 "$rfs/tmp" "$rfs/var/tmp"
  echo sandbox > "$rfs/etc/hostname"
}

debian_rootfs() { # DIR [EXTRA_PACKAGES]
  local rfs=$1 include=python3${2:+,$2}
  debootstrap --variant=minbase --include="$include" bookworm "$rfs" "$(apt_mirror)" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$rfs"/var/cache/apt/archives/*.deb "$rfs"/var/lib/apt/lists/*
  echo sandbox > "$rfs/etc/hostname"
}

# Docker's engine from Debian, and what the fidelity suite (scripts/fidelity/suite.py) uses.
# iptables stays on Debian's default nft backend; overlay2 on the ext4 root (overlay autoloads).
docker_rootfs() {
  local rfs=$1
  debian_rootfs "$rfs" docker.io,containerd,runc,iptables,iproute2,nftables,fuse3,fuse-overlayfs,kmod,procps
  install -m 0755 "$files/start-dockerd" "$rfs/usr/local/bin/start-dockerd"
  mkdir -p "$rfs/etc/docker"
  printf '{\n  "storage-driver": "overlay2",\n  "features": { "buildkit": false }\n}\n' > "$rfs/etc/docker/daemon.json"
}

build_image() { # REF WHAT CONFIG_JSON RECIPE_FUNCTION [MORE KEY PARTS]
  local ref=$1 what=$2 config=$3 recipe=$4 key rfs
  # The config is part of the image (a changed label rebuilds it); '{}' keeps older keys.
  key=$(recipe_key "${@:4}")
  [ "$config" = '{}' ] || key=$(printf '%s %s' "$key" "$config" | sha256sum | cut -c1-16)
  "${tool[@]}" has "$ref" && built_from "$ref" "$key" && return 0
  log "building $ref ($what)"
  rfs="$work/${ref//\//-}-rootfs"; rm -rf "$rfs"; mkdir -p "$rfs"
  "$recipe" "$rfs"
  "${tool[@]}" register "$rfs" "$ref" "$config"
  rm -rf "$rfs"
  echo "$key" > "$(stamp_of "$ref")"
}

hello_rootfs() {
  busybox_rootfs "$1"
  mkdir -p "$1/www"; echo "hello from sandtree/hello" > "$1/www/index.html"
}

# fixtures/hello-docker.tar: `docker load` gives sandtree/hello:latest (busybox; httpd serves /www).
build_hello_archive() {
  local out="$SANDTREE_CACHE_DIR/fixtures/hello-docker.tar" key rfs
  key=$(recipe_key build_hello_archive hello_rootfs busybox_rootfs "$files/nohup")
  [ -s "$out" ] && built_from hello-docker.tar "$key" && return 0
  log "building fixtures/hello-docker.tar"
  rfs="$work/hello-rootfs"; rm -rf "$rfs" "$work/hello-oci"; mkdir -p "$rfs" "$(dirname "$out")"
  hello_rootfs "$rfs"
  "${tool[@]}" oci-layout "$rfs" "$work/hello-oci" latest '{"cmd":["/bin/sh"]}'
  rm -f "$out.tmp"
  skopeo copy --quiet "oci:$work/hello-oci:latest" "docker-archive:$out.tmp:sandtree/hello:latest"
  mv "$out.tmp" "$out"
  rm -rf "$rfs" "$work/hello-oci"
  echo "$key" > "$(stamp_of hello-docker.tar)"
}

build_image sandtree/busybox "static busybox" '{}' busybox_rootfs "$files/nohup"
if [ "${SANDTREE_SKIP_DEBIAN:-0}" != 1 ]; then
  adopt_unkeyed sandtree/debian "$(recipe_key debian_rootfs)"
  build_image sandtree/debian "debootstrap, about a minute" '{}' debian_rootfs
  build_image sandtree/docker "debootstrap with docker.io, a few minutes" \
    '{"cmd":["/usr/local/bin/start-dockerd"],"labels":{"sandtree.start-command":"start-dockerd"}}' \
    docker_rootfs debian_rootfs "$files/start-dockerd"
fi
build_hello_archive
if [ "${SANDTREE_SKIP_DESKTOP:-0}" != 1 ]; then bash "$root/scripts/build-desktop-image.sh"; fi
log "images ready"
